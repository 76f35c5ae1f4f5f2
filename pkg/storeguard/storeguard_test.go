package storeguard_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nanofleet/nanofleet/pkg/storeguard"
)

// smallFS mounts a tmpfs of size bytes for the test, or skips it where
// mounting is not allowed.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

func fill(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for range n {
		if _, err := f.Write(buf); err != nil {
			return // the filesystem is full: that is the point
		}
	}
}

func TestFullAndRecovered(t *testing.T) {
	dir := smallFS(t, "8m")
	reg := prometheus.NewRegistry()
	recovered := 0
	recoverErr := errors.New("not yet")
	g, err := storeguard.New(storeguard.Config{Dir: dir, MinFree: 1 << 20}, reg,
		func(context.Context) error { recovered++; return recoverErr })
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name      string
		act       func()
		full      bool
		recovered int
	}{
		{"empty", func() {}, false, 0},
		{"filled", func() { fill(t, filepath.Join(dir, "ballast"), 16) }, true, 0},
		{"freed, recovery fails", func() { _ = os.Remove(filepath.Join(dir, "ballast")) }, true, 1},
		{"freed, recovery works", func() { recoverErr = nil }, false, 2},
	}
	for _, s := range steps {
		s.act()
		g.Check(t.Context())
		err := g.Err()
		var fe *storeguard.FullError
		if full := errors.As(err, &fe) && errors.Is(err, storeguard.ErrFull); full != s.full {
			t.Fatalf("%s: Err() = %v, want full %v", s.name, err, s.full)
		}
		if recovered != s.recovered {
			t.Fatalf("%s: recovery ran %d times, want %d", s.name, recovered, s.recovered)
		}
		want := 0.0
		if s.full {
			want = 1
		}
		if got := gauge(t, reg, "nanofleet_storage_full"); got != want {
			t.Fatalf("%s: nanofleet_storage_full = %v, want %v", s.name, got, want)
		}
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestStoreLimit(t *testing.T) {
	dir := t.TempDir()
	var used int64
	const limit = 100 << 20
	g, err := storeguard.New(storeguard.Config{Dir: dir, MinFree: 10 << 20,
		Usage: func() (int64, int64, error) { return used, limit, nil }},
		nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		used int64
		full bool
	}{{0, false}, {95 << 20, true}, {85 << 20, true}, {70 << 20, false}}
	for _, tt := range tests {
		used = tt.used
		g.Check(t.Context())
		err := g.Err()
		if (err != nil) != tt.full || err != nil && !strings.Contains(err.Error(), "JetStream store limit") {
			t.Errorf("used %d MiB of 100: Err() = %v, want full %v", tt.used>>20, err, tt.full)
		}
	}
}
