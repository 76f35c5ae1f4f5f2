package main

import (
	"io"
	"slices"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/nanofleet/bench"
)

// TestFlags: the memory suite's flags reach the config, and every preset
// the command offers is a valid run.
func TestFlags(t *testing.T) {
	tests := []struct {
		name  string
		base  bench.Config
		args  []string
		check func(t *testing.T, c bench.Config)
	}{
		{"defaults", bench.DefaultConfig(), nil, func(t *testing.T, c bench.Config) {
			if !slices.Equal(c.MemorySessions, []int{1000, 10_000, 50_000}) || c.TurnSessions != 100 || c.TurnsFirst != 1000 || c.TurnsAll != 100_000 {
				t.Errorf("memory defaults %v %d %d %d", c.MemorySessions, c.TurnSessions, c.TurnsFirst, c.TurnsAll)
			}
		}},
		{"quick", quickConfig(bench.DefaultConfig()), nil, func(*testing.T, bench.Config) {}},
		{"memory flags", bench.DefaultConfig(),
			[]string{"--memory-sessions", "10,20", "--turn-sessions", "5", "--turns-first", "50", "--turns-all", "500", "--memory-settle", "3s"},
			func(t *testing.T, c bench.Config) {
				if !slices.Equal(c.MemorySessions, []int{10, 20}) || c.TurnSessions != 5 || c.TurnsFirst != 50 || c.TurnsAll != 500 || c.MemorySettle != 3*time.Second {
					t.Errorf("parsed %v %d %d %d %s", c.MemorySessions, c.TurnSessions, c.TurnsFirst, c.TurnsAll, c.MemorySettle)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseBenchFlags(io.Discard, tt.args, tt.base)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.cfg.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			tt.check(t, f.cfg)
		})
	}
}
