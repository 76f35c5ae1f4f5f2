package quota_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestKeepFree: on a 16 MiB file system with 8 MiB kept free, writes
// and commands get what is above the 8 MiB, whatever the quota allows.
func TestKeepFree(t *testing.T) {
	ws := storeguardtest.SmallFS(t, "16m")
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
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
			err := m.Reserve(ws, root, quota.Usage{Bytes: tt.add, Files: 1})
			if tt.refused != errors.Is(err, quota.ErrDiskLow) {
				t.Errorf("Reserve(%d) = %v, want refused=%v", tt.add, err, tt.refused)
			}
			left, err := m.Left(ws, root)
			switch {
			case err != nil:
				t.Fatal(err)
			case tt.leftOver && left >= 0:
				t.Errorf("Left = %d, want negative", left)
			case !tt.leftOver && (left <= 0 || left > 16<<20-tt.fill-8<<20):
				t.Errorf("Left = %d, want above 0 and at most the room above the kept 8 MiB", left)
			}
			note, err := m.AfterCommand(ws, root)
			if err != nil || tt.leftOver != strings.Contains(note, "nearly full") {
				t.Errorf("AfterCommand = %q, %v", note, err)
			}
		})
	}
}
