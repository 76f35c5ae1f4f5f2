package worker

import (
	"fmt"
	"time"

	"github.com/nanofleet/nanofleet/services/agent-worker/agent"
)

// Config tunes a worker.
type Config struct {
	// ID names the worker in leases and logs.
	ID string
	// Agent whose profile and workspace the worker serves.
	Agent string
	// Slots is how many turns this worker runs at once. A turn spends
	// nearly all its time waiting on the model, and a waiting turn costs a
	// goroutine, its prompt and a connection (docs/bench: per-turn cost),
	// so the default is sized for model latency, not for cores: 200
	// sessions on a 500 ms model need 200 slots to run at the model's
	// pace. The provider's own bound (providers.<name>.maxConcurrent,
	// halved on 429s) is what protects a slow or rate-limited model.
	Slots int
	// FleetTurnLimit is the consumer's MaxAckPending: turns in flight
	// across all workers, including messages waiting for their session.
	// At least Slots; the default lets 16 workers run at their default
	// slots.
	FleetTurnLimit int
	// AckWait is how long a message may go without InProgress before
	// JetStream redelivers it; leases and InProgress are renewed at a
	// third of the shorter of AckWait and the lease TTL.
	AckWait time.Duration
	// LeaseTTL is the lease bucket's TTL (set by provisioning).
	LeaseTTL time.Duration
	// TurnTimeout bounds one turn.
	TurnTimeout time.Duration
	// MaxAttempts is how many times a turn may be started before the
	// message is dead-lettered.
	MaxAttempts int
	// BusyDelay is the first redelivery delay of a message waiting for its
	// session; it doubles with each delivery up to MaxBusyDelay.
	BusyDelay, MaxBusyDelay time.Duration
	// Model settings.
	Model               string
	Loop                agent.Config
	ContextWindowTokens int
	Location            *time.Location
	Workspace           string
	// ShutdownGrace is how long running turns may take to finish after the
	// worker is told to stop.
	ShutdownGrace time.Duration
	// DailyTokenBudget is how many tokens (prompt + completion) one user
	// (channel and sender id) may spend per UTC day, fleet-wide; 0: no
	// budget. A turn that starts with the budget spent is answered with a
	// message saying so, without the model. The turn that crosses it
	// finishes.
	DailyTokenBudget int64
}

// DefaultSlots is the default Config.Slots (worker.turnsPerWorker).
const DefaultSlots = 1024

// DefaultConfig returns nanobot-like defaults.
func DefaultConfig() Config {
	return Config{
		Agent:               "default",
		Slots:               DefaultSlots,
		FleetTurnLimit:      16 * DefaultSlots,
		AckWait:             30 * time.Second,
		LeaseTTL:            30 * time.Second,
		TurnTimeout:         10 * time.Minute,
		MaxAttempts:         5,
		BusyDelay:           20 * time.Millisecond,
		MaxBusyDelay:        2 * time.Second,
		Model:               "gpt-4o-mini",
		Loop:                agent.Config{MaxIterations: 40, Temperature: 0.1, MaxTokens: 8192},
		ContextWindowTokens: 200_000,
		Location:            time.UTC,
		ShutdownGrace:       11 * time.Minute,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.ID == "":
		return fmt.Errorf("worker.id: must be set")
	case c.Slots < 1:
		return fmt.Errorf("worker.turnsPerWorker: must be at least 1, got %d", c.Slots)
	case c.FleetTurnLimit < c.Slots:
		return fmt.Errorf("worker.fleetTurnLimit: %d is below turnsPerWorker %d", c.FleetTurnLimit, c.Slots)
	case c.AckWait < time.Second:
		return fmt.Errorf("worker.ackWait: must be at least 1s, got %s", c.AckWait)
	case c.LeaseTTL < time.Second:
		return fmt.Errorf("worker.leaseTTL: must be at least 1s, got %s", c.LeaseTTL)
	case c.MaxAttempts < 1:
		return fmt.Errorf("worker.maxAttempts: must be at least 1, got %d", c.MaxAttempts)
	case c.ContextWindowTokens <= c.Loop.MaxTokens:
		return fmt.Errorf("agents.defaults.contextWindowTokens: %d leaves no room beside maxTokens %d", c.ContextWindowTokens, c.Loop.MaxTokens)
	case c.DailyTokenBudget < 0:
		return fmt.Errorf("worker.dailyTokenBudget: must not be negative, got %d", c.DailyTokenBudget)
	case c.BusyDelay <= 0 || c.MaxBusyDelay < c.BusyDelay:
		return fmt.Errorf("worker busy delay: want 0 < min <= max")
	}
	return c.Loop.Validate()
}

// renewEvery is the lease and InProgress renewal period.
func (c Config) renewEvery() time.Duration {
	d := min(c.AckWait, c.LeaseTTL)
	return d / 3
}
