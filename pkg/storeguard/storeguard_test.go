package storeguard_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nanofleet/nanofleet/pkg/observe/observetest"
	"github.com/nanofleet/nanofleet/pkg/storeguard"
	"github.com/nanofleet/nanofleet/pkg/storeguard/storeguardtest"
)

func TestFullAndRecovered(t *testing.T) {
	dir := storeguardtest.SmallFS(t, "8m")
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
		{"filled", func() { storeguardtest.Fill(t, filepath.Join(dir, "ballast")) }, true, 0},
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
		if got := observetest.Gauge(t, reg, "nanofleet_storage_full"); got != want {
			t.Fatalf("%s: nanofleet_storage_full = %v, want %v", s.name, got, want)
		}
	}
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

// TestSmallVolume: on a filesystem smaller than four reserves, the
// reserve is a quarter of it; with the default 32 MiB a 40 MiB volume was
// full while empty. The store limit (the server's, set from the free
// space at its start) does not scale it: on a large volume a small limit
// is a nearly full disk.
func TestSmallVolume(t *testing.T) {
	var used int64
	limit := int64(30 << 20)
	usage := func() (int64, int64, error) { return used, limit, nil }
	g, err := storeguard.New(storeguard.Config{Dir: storeguardtest.SmallFS(t, "40m"), Usage: usage}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// What the tool runner keeps free is twice it.
	if got := g.MinFree(); got != 10<<20 {
		t.Errorf("MinFree() = %d on 40 MiB, want 10 MiB", got)
	}
	for _, tt := range []struct {
		used int64
		full bool
	}{{0, false}, {22 << 20, true}, {12 << 20, true}, {9 << 20, false}} {
		used = tt.used
		g.Check(t.Context())
		if err := g.Err(); (err != nil) != tt.full {
			t.Errorf("used %d MiB of 30 on 40: Err() = %v, want full %v", tt.used>>20, err, tt.full)
		}
	}
	large, err := storeguard.New(storeguard.Config{Dir: t.TempDir(), Usage: func() (int64, int64, error) { return 0, 20 << 20, nil }}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if large.Check(t.Context()); large.Err() == nil {
		t.Error("a 20 MiB store limit on a large volume is not full")
	}
}
