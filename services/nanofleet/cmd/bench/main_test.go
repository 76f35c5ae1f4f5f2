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
			if c.TurnsContextWindow != 8192 || c.TurnsAnswerBytes != 2000 {
				t.Errorf("turns defaults: window %d, answers of %d bytes", c.TurnsContextWindow, c.TurnsAnswerBytes)
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
		{"turns settings", bench.DefaultConfig(),
			[]string{"--turns-context-window", "0", "--turns-answer-bytes", "0"},
			func(t *testing.T, c bench.Config) {
				if c.TurnsContextWindow != 0 || c.TurnsAnswerBytes != 0 {
					t.Errorf("parsed window %d, answer %d bytes; want the fleet's defaults (0, 0)", c.TurnsContextWindow, c.TurnsAnswerBytes)
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
