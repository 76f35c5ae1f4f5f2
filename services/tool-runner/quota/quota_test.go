package quota_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nanofleet/nanofleet/pkg/storeguard/storeguardtest"
	"github.com/nanofleet/nanofleet/services/tool-runner/quota"
)

func TestBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1 << 20, "1.0 MiB"}, {3 << 29, "1.5 GiB"}}
	for _, tt := range tests {
		if got := quota.Bytes(tt.n); got != tt.want {
			t.Errorf("Bytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// TestMeasureFollowsNoSymlink: a symlink to a large directory outside
// counts as one entry, not as what it points at.
func TestMeasureFollowsNoSymlink(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(outside, string(rune('a'+i))), make([]byte, 8192), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(ws, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "d", "f"), make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, ws)
	u, err := quota.Measure(t.Context(), root, 0)
	if err != nil {
		t.Fatal(err)
	}
	if u.Files != 3 || u.Bytes < 8192 || u.Bytes > 64<<10 {
		t.Fatalf("usage = %+v, want 3 entries and about 8 KiB", u)
	}
}

func TestReserve(t *testing.T) {
	ws := t.TempDir()
	root := openRoot(t, ws)
	m := quota.NewMeter(quota.Limits{Bytes: 1 << 20, Files: 3}, time.Hour)
	tests := []struct {
		add  quota.Usage
		fail bool
	}{
		{quota.Usage{Bytes: 600 << 10, Files: 1}, false},
		{quota.Usage{Bytes: 600 << 10, Files: 1}, true}, // bytes: counted from the first reservation
		{quota.Usage{Bytes: 1, Files: 2}, false},
		{quota.Usage{Bytes: 1, Files: 1}, true}, // files
	}
	for i, tt := range tests {
		err := m.Reserve(t.Context(), ws, root, tt.add)
		if tt.fail != errors.Is(err, quota.ErrExceeded) {
			t.Errorf("reservation %d: %v, want refused=%v", i, err, tt.fail)
		}
	}
}

// TestKeepFree: on a 16 MiB file system with 8 MiB kept free, writes
// and commands get what is above the 8 MiB, whatever the quota allows.
func TestKeepFree(t *testing.T) {
	ws := storeguardtest.SmallFS(t, "16m")
	root := openRoot(t, ws)
	tests := []struct {
		name     string
		limits   quota.Limits
		fill     int64 // written before
		add      int64 // reserved
		refused  bool
		leftOver bool // Left says no file may grow
	}{
		{"room for it", quota.Limits{KeepFree: 8 << 20}, 0, 4 << 20, false, false},
		{"would go into the kept room", quota.Limits{KeepFree: 8 << 20}, 0, 10 << 20, true, false},
		{"quota larger than the disk", quota.Limits{Bytes: 1 << 30, KeepFree: 8 << 20}, 6 << 20, 4 << 20, true, false},
		{"already in the kept room", quota.Limits{Bytes: 1 << 30, KeepFree: 8 << 20}, 10 << 20, 1, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			big := filepath.Join(ws, "big")
			if err := os.WriteFile(big, make([]byte, tt.fill), 0o644); err != nil {
				t.Fatal(err)
			}
			m := quota.NewMeter(tt.limits, time.Hour)
			err := m.Reserve(t.Context(), ws, root, quota.Usage{Bytes: tt.add, Files: 1})
			if tt.refused != errors.Is(err, quota.ErrDiskLow) {
				t.Errorf("Reserve(%d) = %v, want refused=%v", tt.add, err, tt.refused)
			}
			left, err := m.Left(t.Context(), ws, root)
			switch {
			case err != nil:
				t.Fatal(err)
			case tt.leftOver && left >= 0:
				t.Errorf("Left = %d, want negative", left)
			case !tt.leftOver && (left <= 0 || left > 16<<20-tt.fill-8<<20):
				t.Errorf("Left = %d, want above 0 and at most the room above the kept 8 MiB", left)
			}
			note, err := m.AfterCommand(t.Context(), ws, root)
			if err != nil || tt.leftOver != strings.Contains(note, "nearly full") {
				t.Errorf("AfterCommand = %q, %v", note, err)
			}
		})
	}
}

// deepTree makes n nested directories "d" in dir, each opened from its
// parent (a path of n components is past what one call may name), and
// a file at the bottom.
func deepTree(t testing.TB, dir string, n int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "f", unix.O_WRONLY|unix.O_CREAT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(f)
}

// TestMeasure: names are counted as the file system holds them (one
// that is not UTF-8 made the walk fail, and the runner then stopped
// nothing), and a tree deeper than MaxDepth is reported by path, not
// walked (each level was resolved again from the workspace's top: 3,000
// levels took 4.4 s a measurement).
func TestMeasure(t *testing.T) {
	tests := []struct {
		name      string
		make      func(t *testing.T, ws string)
		files     int64
		deepError bool
	}{
		{"name not UTF-8", func(t *testing.T, ws string) {
			if err := os.Mkdir(filepath.Join(ws, "bad\xff"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "bad\xff", "f\xfe"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, 2, false},
		{"as deep as allowed", func(t *testing.T, ws string) { deepTree(t, ws, quota.MaxDepth) }, quota.MaxDepth + 1, false},
		{"deeper", func(t *testing.T, ws string) { deepTree(t, ws, quota.MaxDepth+1) }, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			tt.make(t, ws)
			root := openRoot(t, ws)
			u, err := quota.Measure(t.Context(), root, 0)
			var ue *quota.UnmeasurableError
			switch {
			case tt.deepError:
				if !errors.As(err, &ue) || strings.Count(ue.Path, "d") != quota.MaxDepth+1 {
					t.Fatalf("Measure = %+v, %v; want the directory past MaxDepth named", u, err)
				}
			case err != nil:
				t.Fatal(err)
			case u.Files != tt.files:
				t.Errorf("usage = %+v, want %d entries", u, tt.files)
			}
		})
	}
}

// TestMeasureEndsWithItsContext: a walk stops when its context ends.
func TestMeasureEndsWithItsContext(t *testing.T) {
	ws := t.TempDir()
	for i := range 3000 {
		if err := os.WriteFile(filepath.Join(ws, strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := openRoot(t, ws)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if u, err := quota.Measure(ctx, root, 0); !errors.Is(err, context.Canceled) || u.Files >= 3000 {
		t.Errorf("Measure with an ended context = %+v, %v; want it stopped with context.Canceled", u, err)
	}
}

// TestUnmeasurableCountsAsOver: an entry that cannot be measured makes
// the workspace over its quota, with the entry named and how to remove
// it, until it is gone.
func TestUnmeasurableCountsAsOver(t *testing.T) {
	ws := t.TempDir()
	deepTree(t, ws, quota.MaxDepth+1)
	root := openRoot(t, ws)
	m := quota.NewMeter(quota.Limits{Bytes: 1 << 30, Files: 100_000}, time.Hour)
	err := m.Reserve(t.Context(), ws, root, quota.Usage{Bytes: 1, Files: 1})
	if !errors.Is(err, quota.ErrExceeded) || !strings.Contains(err.Error(), "cannot be measured") || !strings.Contains(err.Error(), "rm -rf") {
		t.Errorf("Reserve = %v, want refused, naming the entry and rm", err)
	}
	if left, err := m.Left(t.Context(), ws, root); err != nil || left >= 0 {
		t.Errorf("Left = %d, %v; want negative: no file may grow", left, err)
	}
	if note, err := m.AfterCommand(t.Context(), ws, root); err != nil || !strings.Contains(note, "cannot be measured") {
		t.Errorf("AfterCommand = %q, %v", note, err)
	}
	if err := os.RemoveAll(filepath.Join(ws, "d")); err != nil {
		t.Fatal(err)
	}
	if note, err := m.AfterCommand(t.Context(), ws, root); err != nil || note != "" {
		t.Errorf("AfterCommand once removed = %q, %v; want no note", note, err)
	}
	if err := m.Reserve(t.Context(), ws, root, quota.Usage{Bytes: 1, Files: 1}); err != nil {
		t.Errorf("Reserve once removed: %v", err)
	}
}

// openRoot opens dir as an os.Root, closed when the test ends.
func openRoot(t testing.TB, dir string) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = root.Close() })
	return root
}

// BenchmarkMeasure walks a workspace of 100 directories of 100 files,
// and a chain of 250 nested directories.
func BenchmarkMeasure(b *testing.B) {
	wide := b.TempDir()
	for i := range 100 {
		d := filepath.Join(wide, strconv.Itoa(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range 100 {
			if err := os.WriteFile(filepath.Join(d, strconv.Itoa(j)), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	deep := b.TempDir()
	deepTree(b, deep, 250)
	for _, bb := range []struct{ name, dir string }{{"wide", wide}, {"deep", deep}} {
		b.Run(bb.name, func(b *testing.B) {
			root := openRoot(b, bb.dir)
			for b.Loop() {
				if _, err := quota.Measure(b.Context(), root, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
