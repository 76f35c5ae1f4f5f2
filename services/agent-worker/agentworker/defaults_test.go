package agentworker

import (
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
)

// TestDefaultSlotsMeetTheTarget fails when the shipped defaults can no
// longer reach the throughput target of issue 20: the all-in-one (one
// worker) at ≥ 90 % of the ideal with 200 sessions on a 500 ms model. Each
// session has one turn in flight at a time, so the ideal needs a slot per
// session; fewer slots cap the throughput at slots ÷ model time whatever
// the rest of the fleet does. It reads the configuration only: the timed
// figures are the bench's ("all-in-one as shipped", docs/bench).
func TestDefaultSlotsMeetTheTarget(t *testing.T) {
	tests := []struct {
		name     string
		sessions int
		model    time.Duration
		share    float64 // of the ideal turns/s the slots must allow
	}{
		{"issue 20: 200 sessions, 500 ms model, 90 %", 200, 500 * time.Millisecond, 0.9},
		{"bench: 1,000 sessions, 500 ms model, 90 %", 1000, 500 * time.Millisecond, 0.9},
	}
	cfg, _, err := ConfigFrom(config.Defaults(), "w", "/workspace")
	if err != nil {
		t.Fatalf("the default config does not validate: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ideal := float64(tt.sessions) / tt.model.Seconds()
			ceiling := float64(min(cfg.Slots, cfg.FleetTurnLimit, tt.sessions)) / tt.model.Seconds()
			// Every session must have its slot: the bus overhead, not the
			// slots, is what the remaining share is for.
			if cfg.Slots < tt.sessions || ceiling < tt.share*ideal {
				t.Errorf("default turnsPerWorker %d, fleetTurnLimit %d allow %.0f turns/s; the target needs a slot per session (%d) and %.0f turns/s",
					cfg.Slots, cfg.FleetTurnLimit, ceiling, tt.sessions, tt.share*ideal)
			}
		})
	}
	if cfg.FleetTurnLimit < 4*cfg.Slots {
		t.Errorf("default fleetTurnLimit %d holds fewer than 4 workers at the default %d slots", cfg.FleetTurnLimit, cfg.Slots)
	}
}
