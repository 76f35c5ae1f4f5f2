package wsfile_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nanofleet/nanofleet/pkg/wsfile"
	"github.com/nanofleet/nanofleet/pkg/wsfile/wsfiletest"
)

func TestOpenDirOpensNothingButADirectory(t *testing.T) {
	tests := []struct {
		name  string
		plant func(t *testing.T, ws string) // makes ws/x
		want  error                         // nil: opened
	}{
		{"directory", func(t *testing.T, ws string) { must(t, os.Mkdir(filepath.Join(ws, "x"), 0o755)) }, nil},
		{"symlink to a directory inside", func(t *testing.T, ws string) { must(t, os.Symlink("sub", filepath.Join(ws, "x"))) }, nil},
		{"FIFO", func(t *testing.T, ws string) { must(t, unix.Mkfifo(filepath.Join(ws, "x"), 0o644)) }, syscall.ENOTDIR},
		{"symlink to a FIFO inside", func(t *testing.T, ws string) {
			must(t, unix.Mkfifo(filepath.Join(ws, "fifo"), 0o644))
			must(t, os.Symlink("fifo", filepath.Join(ws, "x")))
		}, syscall.ENOTDIR},
		{"regular file", func(t *testing.T, ws string) { must(t, os.WriteFile(filepath.Join(ws, "x"), nil, 0o644)) }, syscall.ENOTDIR},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ws, _ := layout(t)
			tc.plant(t, ws)
			r, err := os.OpenRoot(ws)
			must(t, err)
			defer r.Close()
			err = wsfiletest.Within(t, 10*time.Second, []string{filepath.Join(ws, "x"), filepath.Join(ws, "fifo")}, func() error {
				d, err := wsfile.OpenDir(r, "x")
				if err == nil {
					d.Close()
				}
				return err
			})
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("OpenDir = %v, want %v", err, tc.want)
			}
		})
	}
}

// A sandboxed command swaps a FIFO in for the directory on the way to
// a file between the reader's check of the directory and its open: the
// read fails, it never waits for a writer to the FIFO. The memory
// consolidator's file sync waited there for good (found with a command
// exchanging memory/ and a FIFO while the all-in-one ran).
func TestReadNeverWaitsOnAFIFOSwappedIn(t *testing.T) {
	d, ws, _ := layout(t)
	dir, fifo := filepath.Join(ws, "memory"), filepath.Join(ws, "fifo")
	must(t, os.WriteFile(filepath.Join(dir, "MEMORY.md"), []byte("memory"), 0o644))
	must(t, unix.Mkfifo(fifo, 0o644))
	wsfiletest.KeepExchanging(t, dir, fifo)
	err := wsfiletest.Within(t, 10*time.Second, []string{dir, fifo}, func() error {
		for range 20000 {
			if _, _, err := d.ReadFile(filepath.Join("memory", "MEMORY.md"), 0); err != nil &&
				!errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, wsfile.ErrSymlink) && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
}

func TestFSOpensNoFIFO(t *testing.T) {
	_, ws, _ := layout(t)
	fifo := filepath.Join(ws, "sub", "fifo")
	must(t, unix.Mkfifo(fifo, 0o644))
	r, err := os.OpenRoot(ws)
	must(t, err)
	defer r.Close()
	fsys := wsfile.FS(r)
	var walked []string
	err = wsfiletest.Within(t, 10*time.Second, []string{fifo}, func() error {
		if _, err := fs.ReadDir(fsys, "sub/fifo"); !errors.Is(err, wsfile.ErrNotRegular) {
			return fmt.Errorf("ReadDir of the FIFO = %v, want %v", err, wsfile.ErrNotRegular)
		}
		if _, err := fs.ReadFile(fsys, "sub/fifo"); !errors.Is(err, wsfile.ErrNotRegular) {
			return fmt.Errorf("ReadFile of the FIFO = %v, want %v", err, wsfile.ErrNotRegular)
		}
		return fs.WalkDir(fsys, ".", func(p string, _ fs.DirEntry, err error) error {
			walked = append(walked, p)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if data, err := fs.ReadFile(fsys, "sub/deep/f.md"); err != nil || string(data) != "deep" {
		t.Errorf("ReadFile = %q, %v", data, err)
	}
	if !slices.Contains(walked, "sub/fifo") || !slices.Contains(walked, "sub/deep/f.md") {
		t.Errorf("walked %q", walked)
	}
}
