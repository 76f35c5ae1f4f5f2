package wsfile_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/wsfile"
)

// layout builds base/ws (the directory opened) and base/host (outside it)
// holding secret.txt, and returns the Dir and both paths.
func layout(t *testing.T) (*wsfile.Dir, string, string) {
	t.Helper()
	base := t.TempDir()
	ws, host := filepath.Join(base, "ws"), filepath.Join(base, "host")
	for _, d := range []string{filepath.Join(ws, "memory"), filepath.Join(ws, "sub", "deep"), host} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(host, "secret.txt"), "SECRET")
	write(filepath.Join(ws, "USER.md"), "user")
	write(filepath.Join(ws, "sub", "deep", "f.md"), "deep")
	d, err := wsfile.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, ws, host
}

func TestReadRefusesWhatATrustedReaderMustNotFollow(t *testing.T) {
	tests := []struct {
		name  string
		plant func(t *testing.T, ws, host string) // makes ws/x
		path  string
		want  error // nil: reads "user"
	}{
		{"regular file", func(*testing.T, string, string) {}, "USER.md", nil},
		{"absolute symlink to a host file", func(t *testing.T, ws, host string) {
			must(t, os.Symlink(filepath.Join(host, "secret.txt"), filepath.Join(ws, "x")))
		}, "x", wsfile.ErrSymlink},
		{"relative symlink inside", func(t *testing.T, ws, _ string) {
			must(t, os.Symlink("USER.md", filepath.Join(ws, "x")))
		}, "x", wsfile.ErrSymlink},
		{"directory symlink to the host", func(t *testing.T, ws, host string) {
			must(t, os.Symlink(host, filepath.Join(ws, "x")))
		}, "x/secret.txt", wsfile.ErrSymlink},
		{"directory symlink inside", func(t *testing.T, ws, _ string) {
			must(t, os.Symlink("sub", filepath.Join(ws, "x")))
		}, "x/deep/f.md", wsfile.ErrSymlink},
		{"hard link to a host file", func(t *testing.T, ws, host string) {
			must(t, os.Link(filepath.Join(host, "secret.txt"), filepath.Join(ws, "x")))
		}, "x", wsfile.ErrHardLink},
		{"directory", func(*testing.T, string, string) {}, "memory", wsfile.ErrNotRegular},
		{"dot dot", func(*testing.T, string, string) {}, "../host/secret.txt", wsfile.ErrOutside},
		{"absolute path", func(_ *testing.T, _, host string) {}, "/etc/passwd", wsfile.ErrOutside},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ws, host := layout(t)
			tt.plant(t, ws, host)
			data, _, err := d.ReadFile(tt.path, 0)
			if tt.want == nil {
				if err != nil || string(data) != "user" {
					t.Fatalf("ReadFile = %q, %v", data, err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("ReadFile(%s) = %q, %v; want %v", tt.path, data, err, tt.want)
			}
			if string(data) == "SECRET" {
				t.Fatal("the host file was read")
			}
		})
	}
}

func TestWriteNeverLandsOutside(t *testing.T) {
	tests := []struct {
		name    string
		plant   func(t *testing.T, ws, host string)
		path    string
		wantErr error // nil: written inside
	}{
		{"new file in a new directory", func(*testing.T, string, string) {}, "memory/new/MEMORY.md", nil},
		{"symlink at the target is replaced", func(t *testing.T, ws, host string) {
			must(t, os.Symlink(filepath.Join(host, "secret.txt"), filepath.Join(ws, "memory", "MEMORY.md")))
		}, "memory/MEMORY.md", nil},
		{"hard link at the target is replaced", func(t *testing.T, ws, host string) {
			must(t, os.Link(filepath.Join(host, "secret.txt"), filepath.Join(ws, "memory", "MEMORY.md")))
		}, "memory/MEMORY.md", nil},
		{"parent directory swapped for a host symlink", func(t *testing.T, ws, host string) {
			must(t, os.Rename(filepath.Join(ws, "memory"), filepath.Join(ws, "memory.old")))
			must(t, os.Symlink(host, filepath.Join(ws, "memory")))
		}, "memory/MEMORY.md", wsfile.ErrSymlink},
		{"dot dot", func(*testing.T, string, string) {}, "../host/x", wsfile.ErrOutside},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ws, host := layout(t)
			tt.plant(t, ws, host)
			err := d.WriteFile(tt.path, []byte("mine"), wsfile.WriteOptions{})
			if got, _ := os.ReadFile(filepath.Join(host, "secret.txt")); string(got) != "SECRET" {
				t.Fatalf("host file changed to %q", got)
			}
			if entries, _ := os.ReadDir(host); len(entries) != 1 {
				t.Fatalf("host directory holds %d entries, want 1", len(entries))
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("WriteFile = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(filepath.Join(ws, tt.path))
			if err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("target after write: %v, %v", fi, err)
			}
			if got, _ := os.ReadFile(filepath.Join(ws, tt.path)); string(got) != "mine" {
				t.Fatalf("target holds %q", got)
			}
		})
	}
}

func TestWriteUnlessCancels(t *testing.T) {
	d, ws, _ := layout(t)
	stop := errors.New("changed meanwhile")
	err := d.WriteFile("USER.md", []byte("new"), wsfile.WriteOptions{Unless: func(cur []byte, ok bool) error {
		if !ok || string(cur) != "user" {
			t.Errorf("Unless got %q, %v", cur, ok)
		}
		return stop
	}})
	if !errors.Is(err, stop) {
		t.Fatalf("WriteFile = %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "USER.md")); string(got) != "user" {
		t.Fatalf("USER.md = %q", got)
	}
	entries, _ := os.ReadDir(ws)
	for _, e := range entries {
		if e.Type()&fs.ModeType == 0 && e.Name() != "USER.md" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// TestWriteUnlessBoundsTheRead: the target is the sandbox's to fill, and
// a sparse file costs it no quota; Unless is never given more than
// UnlessMax bytes of it (the file sync read a 900 MB MEMORY.md whole on
// every poll).
func TestWriteUnlessBoundsTheRead(t *testing.T) {
	tests := []struct {
		name   string
		size   int64 // of a sparse USER.md
		max    int64
		wantOK bool
	}{
		{"at the bound", 8, 8, true},
		{"one byte over", 9, 8, false},
		{"64 MiB sparse file, default bound", 64 << 20, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ws, _ := layout(t)
			must(t, os.Truncate(filepath.Join(ws, "USER.md"), tt.size))
			called := false
			err := d.WriteFile("USER.md", []byte("new"), wsfile.WriteOptions{UnlessMax: tt.max, Unless: func(cur []byte, ok bool) error {
				called = true
				if ok != tt.wantOK || (ok && int64(len(cur)) != tt.size) || (!ok && cur != nil) {
					t.Errorf("Unless got %d bytes, ok %v; want ok %v", len(cur), ok, tt.wantOK)
				}
				return nil
			}})
			if err != nil || !called {
				t.Fatalf("WriteFile = %v, Unless called %v", err, called)
			}
			if got, _ := os.ReadFile(filepath.Join(ws, "USER.md")); string(got) != "new" {
				t.Fatalf("USER.md = %d bytes, want replaced", len(got))
			}
		})
	}
}

func TestReadDirRefusesSymlinkedDirectory(t *testing.T) {
	d, ws, host := layout(t)
	must(t, os.Symlink(host, filepath.Join(ws, "skills")))
	if _, err := d.ReadDir("skills"); !errors.Is(err, wsfile.ErrSymlink) {
		t.Fatalf("ReadDir = %v", err)
	}
	entries, err := d.ReadDir("sub")
	if err != nil || len(entries) != 1 || entries[0].Name() != "deep" {
		t.Fatalf("ReadDir(sub) = %v, %v", entries, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestWriteAsRootTakesTheDirectorysOwner: a root runner gives the
// workspace to an unprivileged user for exec; what the file sync writes
// there (memory/, MEMORY.md) was root's, readable to exec but not
// changeable. Now it is the owner's of the directory it is written in.
func TestWriteAsRootTakesTheDirectorysOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root writes files for another user")
	}
	const uid, gid = 65534, 65534
	ws := t.TempDir()
	if err := os.Chown(ws, uid, gid); err != nil {
		t.Fatal(err)
	}
	d, err := wsfile.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.WriteFile("memory/MEMORY.md", []byte("facts"), wsfile.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("USER.md", []byte("user"), wsfile.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"memory", "memory/MEMORY.md", "USER.md"} {
		fi, err := os.Lstat(filepath.Join(ws, rel))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
			t.Errorf("%s is %d:%d, want the workspace owner's %d:%d", rel, st.Uid, st.Gid, uid, gid)
		}
	}
	// A directory of root's keeps what is written in it root's.
	root := filepath.Join(ws, "rootdir")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(root, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("rootdir/f", []byte("x"), wsfile.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(root, "f")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("rootdir/f: %v, want root's", err)
	}
}

// TestOpenNamesTheDirectoryOnce: a workspace that does not exist is named
// once, with the operation once (it read "open /ws: open /ws: no such
// file or directory").
func TestOpenNamesTheDirectoryOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nonexist")
	_, err := wsfile.Open(dir)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open(%s) = %v, want fs.ErrNotExist", dir, err)
	}
	if want := "open " + dir + ": no such file or directory"; err.Error() != want {
		t.Errorf("Open(%s) = %q, want %q", dir, err, want)
	}
}
