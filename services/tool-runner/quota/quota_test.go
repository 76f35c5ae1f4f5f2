package quota_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

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
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	u, err := quota.Measure(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	if u.Files != 3 || u.Bytes < 8192 || u.Bytes > 64<<10 {
		t.Fatalf("usage = %+v, want 3 entries and about 8 KiB", u)
	}
}

func TestReserve(t *testing.T) {
	ws := t.TempDir()
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
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
		err := m.Reserve(ws, root, tt.add)
		if tt.fail != errors.Is(err, quota.ErrExceeded) {
			t.Errorf("reservation %d: %v, want refused=%v", i, err, tt.fail)
		}
	}
}
