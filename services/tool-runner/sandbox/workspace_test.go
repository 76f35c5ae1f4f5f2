package sandbox_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/wsfile"
	"github.com/nanofleet/nanofleet/pkg/wsfile/wsfiletest"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
)

// layout makes <tmp>/ws (the workspace) and <tmp>/outside/secret.txt.
func layout(t *testing.T) (ws *sandbox.Workspace, outside string) {
	t.Helper()
	base := t.TempDir()
	outside = filepath.Join(base, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOP SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, err := sandbox.OpenWorkspace(filepath.Join(base, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, outside
}

func TestRel(t *testing.T) {
	ws, _ := layout(t)
	tests := []struct {
		in      string
		want    string
		outside bool
	}{
		{"notes.md", "notes.md", false},
		{"./a/../b.txt", "b.txt", false},
		{"", ".", false},
		{".", ".", false},
		{ws.Dir(), ".", false},
		{ws.Dir() + "/src/main.go", "src/main.go", false},
		{"../secret", "", true},
		{"a/../../secret", "", true},
		{"..", "", true},
		{"/etc/passwd", "", true},
		{"/proc/self/root/etc/passwd", "", true},
		{"~", "", true},
		{"~/.ssh/id_rsa", "", true},
		{"~root/.bashrc", "", true},
		{filepath.Dir(ws.Dir()) + "/outside/secret.txt", "", true},
	}
	for _, tt := range tests {
		got, err := ws.Rel(tt.in)
		if tt.outside {
			if !errors.Is(err, sandbox.ErrOutsideWorkspace) || !errors.Is(err, sandbox.ErrDenied) {
				t.Errorf("Rel(%q) = %q, %v; want ErrOutsideWorkspace", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Rel(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := ws.Rel("a\x00b"); !errors.Is(err, sandbox.ErrDenied) {
		t.Errorf("Rel with NUL: %v", err)
	}
}

func TestWorkspaceRefusals(t *testing.T) {
	ws, outside := layout(t)
	dir := ws.Dir()
	secret := filepath.Join(outside, "secret.txt")
	must(t, os.Symlink(secret, filepath.Join(dir, "abs-link")))
	must(t, os.Symlink("../outside/secret.txt", filepath.Join(dir, "rel-link")))
	must(t, os.Symlink("../outside", filepath.Join(dir, "dir-link")))
	must(t, os.Symlink("/dev/zero", filepath.Join(dir, "zero")))
	must(t, os.Symlink("/nonexistent/outside", filepath.Join(dir, "dangling")))
	must(t, os.Link(secret, filepath.Join(dir, "hard")))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))

	tests := []struct {
		path string
		want error
	}{
		{"abs-link", sandbox.ErrOutsideWorkspace},
		{"rel-link", sandbox.ErrOutsideWorkspace},
		{"dir-link/secret.txt", sandbox.ErrOutsideWorkspace},
		{"zero", sandbox.ErrOutsideWorkspace},
		{"/dev/zero", sandbox.ErrOutsideWorkspace},
		{"dangling", sandbox.ErrOutsideWorkspace},
		{"hard", sandbox.ErrHardLink},
		{"fifo", sandbox.ErrSpecialFile},
		{"../outside/secret.txt", sandbox.ErrOutsideWorkspace},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			// Opening a FIFO or device must not block. The FIFO has no
			// writer, so an Open that opened it would never return: Open
			// returning a refusal is the proof, and Within's timeout
			// only turns such a hang into a failure.
			err := wsfiletest.Within(t, 30*time.Second, []string{filepath.Join(dir, "fifo")}, func() error {
				f, _, err := ws.Open(tt.path)
				if err == nil {
					f.Close()
				}
				return err
			})
			if err == nil {
				t.Fatalf("Open(%q) succeeded", tt.path)
			}
			if !errors.Is(err, tt.want) || !errors.Is(err, sandbox.ErrDenied) {
				t.Errorf("Open(%q) = %v, want %v", tt.path, err, tt.want)
			}
			t.Logf("%s", err)
		})
	}

	// Writing through an escaping symlink is refused; the outside file is
	// unchanged.
	for _, p := range []string{"abs-link", "rel-link", "dir-link/new.txt", "dangling"} {
		if err := ws.WriteFile(p, []byte("pwned")); !errors.Is(err, sandbox.ErrDenied) {
			t.Errorf("WriteFile(%q) = %v, want a denial", p, err)
		}
	}
	// Writing over a hard link replaces the link; the file it aliased is
	// unchanged.
	must(t, ws.WriteFile("hard", []byte("replaced")))
	if got, _ := os.ReadFile(secret); string(got) != "TOP SECRET" {
		t.Errorf("outside file changed to %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "hard")); string(got) != "replaced" {
		t.Errorf("hard = %q", got)
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file appeared outside: %v", err)
	}
}

func TestWorkspaceFiles(t *testing.T) {
	ws, _ := layout(t)
	must(t, ws.WriteFile("a/b/c.txt", []byte("one")))
	must(t, os.Chmod(filepath.Join(ws.Dir(), "a/b/c.txt"), 0o600))
	must(t, ws.WriteFile("a/b/c.txt", []byte("two")))
	data, err := ws.ReadFile("a/b/c.txt", 0)
	if err != nil || string(data) != "two" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	if fi, _ := os.Stat(filepath.Join(ws.Dir(), "a/b/c.txt")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after rewrite = %v, want 0600 kept", fi.Mode().Perm())
	}
	// A symlink inside the workspace is followed.
	must(t, os.Symlink("a/b/c.txt", filepath.Join(ws.Dir(), "inner")))
	if data, err := ws.ReadFile("inner", 0); err != nil || string(data) != "two" {
		t.Errorf("read through inner symlink = %q, %v", data, err)
	}
	must(t, ws.WriteFile("inner", []byte("three")))
	if data, _ := ws.ReadFile("a/b/c.txt", 0); string(data) != "three" {
		t.Errorf("write through inner symlink: target = %q", data)
	}
	if _, err := ws.ReadFile("a/b/c.txt", 2); err == nil {
		t.Error("ReadFile over max succeeded")
	}
	if _, _, err := ws.Open("missing.txt"); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, sandbox.ErrDenied) {
		t.Errorf("Open(missing) = %v, want not-exist", err)
	}
	if _, _, err := ws.Open("a"); !errors.Is(err, sandbox.ErrIsDirectory) {
		t.Errorf("Open(dir) = %v", err)
	}
	if err := ws.WriteFile("a", []byte("x")); !errors.Is(err, sandbox.ErrIsDirectory) {
		t.Errorf("WriteFile(dir) = %v", err)
	}
	if err := ws.WriteFile("a/b/c.txt/d", []byte("x")); err == nil {
		t.Error("WriteFile under a file succeeded")
	}
	entries, err := ws.ReadDir("a/b")
	if err != nil || len(entries) != 1 || entries[0].Name() != "c.txt" {
		t.Errorf("ReadDir = %v, %v (temp files left behind?)", entries, err)
	}
	if _, err := ws.Directory("a/b/c.txt"); !errors.Is(err, sandbox.ErrNotDirectory) {
		t.Errorf("Directory(file) = %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A FIFO where a directory on the way belongs (a command in the sandbox
// makes one with mkfifo) is refused, never opened: os.Root.OpenRoot
// opened it as the parent directory and waited for a writer, for good,
// holding the tool call and the runner's shutdown. Found with the
// all-in-one: write_file "ff/x.txt" after "mkfifo ff" never answered,
// and the process outlived SIGTERM by minutes.
func TestFIFOOnTheWayIsNotOpened(t *testing.T) {
	tests := []struct {
		name string
		do   func(ws *sandbox.Workspace) error
	}{
		{"WriteFile in it", func(ws *sandbox.Workspace) error { return ws.WriteFile("fifo/x.txt", []byte("x")) }},
		{"WriteFile below it", func(ws *sandbox.Workspace) error { return ws.WriteFile("fifo/a/x.txt", []byte("x")) }},
		{"MkdirAll below it", func(ws *sandbox.Workspace) error { _, err := ws.MkdirAll("fifo/a/b"); return err }},
		{"Remove in it", func(ws *sandbox.Workspace) error { return ws.Remove("fifo/x.txt") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, _ := layout(t)
			must(t, syscall.Mkfifo(filepath.Join(ws.Dir(), "fifo"), 0o644))
			// The FIFO has no writer: an open of it never returns, so
			// the answer is the proof, and the timeout only turns such
			// a wait into a failure.
			err := wsfiletest.Within(t, 30*time.Second, []string{filepath.Join(ws.Dir(), "fifo")}, func() error { return tt.do(ws) })
			if !errors.Is(err, sandbox.ErrNotDirectory) {
				t.Fatalf("got %v, want %v", err, sandbox.ErrNotDirectory)
			}
			t.Logf("%s", err)
			if fi, err := os.Lstat(filepath.Join(ws.Dir(), "fifo")); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
				t.Errorf("the FIFO was changed: %v %v", fi, err)
			}
		})
	}
}

// The workspace's file system (list_dir, glob, grep) opens no FIFO: a
// command in the sandbox exchanging a directory and a FIFO while another
// session listed it held list_dir in os.Root's open for good (the
// all-in-one, two sessions sharing the workspace: the fourth list_dir
// never answered; the goroutine dump showed rootFS.ReadDir in openat).
func TestListingNeverWaitsOnAFIFO(t *testing.T) {
	t.Run("FIFO opened through FS", func(t *testing.T) {
		ws, _ := layout(t)
		fifo := filepath.Join(ws.Dir(), "fifo")
		must(t, syscall.Mkfifo(fifo, 0o644))
		for _, read := range []func() error{
			func() error { _, err := fs.ReadDir(ws.FS(), "fifo"); return err },
			func() error { _, err := fs.ReadFile(ws.FS(), "fifo"); return err },
		} {
			if err := wsfiletest.Within(t, 30*time.Second, []string{fifo}, read); !errors.Is(err, wsfile.ErrNotRegular) {
				t.Fatalf("got %v, want %v", err, wsfile.ErrNotRegular)
			}
		}
	})
	t.Run("FIFO swapped in for the directory listed", func(t *testing.T) {
		ws, _ := layout(t)
		dir, fifo := filepath.Join(ws.Dir(), "d"), filepath.Join(ws.Dir(), "fifo")
		must(t, os.Mkdir(dir, 0o755))
		must(t, syscall.Mkfifo(fifo, 0o644))
		wsfiletest.KeepExchanging(t, dir, fifo)
		err := wsfiletest.Within(t, 30*time.Second, []string{dir, fifo}, func() error {
			for range 20000 {
				if _, err := ws.ReadDir("d"); err != nil && !errors.Is(err, sandbox.ErrNotDirectory) {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("ReadDir: %v", err)
		}
	})
}
