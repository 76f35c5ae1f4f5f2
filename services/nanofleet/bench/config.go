package bench

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

// Suites a run may choose from, in the order they run.
const (
	SuiteZero    = "zero"    // all-in-one, model at 0 ms: sessions sweep, tool calls
	SuiteSlots   = "slots"   // all-in-one, slow model, up to 1,000 sessions
	SuiteShipped = "shipped" // the all-in-one binary at its defaults, slow model
	SuiteTTFT    = "ttft"    // time to first token through the gateway, streaming model
	SuiteOneShot = "oneshot" // `nanofleet agent -m` cold and joining a running fleet
	SuiteWorkers = "workers" // multi-process, 1→2→4 worker processes
	SuiteIdle    = "idle"    // idle RSS of every binary
	SuiteMemory  = "memory"  // RSS per idle session, RSS growth with turns
)

// AllSuites is every suite in running order.
var AllSuites = []string{SuiteZero, SuiteSlots, SuiteShipped, SuiteTTFT, SuiteOneShot, SuiteWorkers, SuiteIdle, SuiteMemory}

// Config is one bench run. Every size is a flag of cmd/bench, so
// a run on a bigger machine (or a quick smoke run) needs no code change.
type Config struct {
	// Root is the go.work workspace, where binaries are built from.
	Root string
	// Suites to run (see AllSuites).
	Suites []string

	// ZeroSessions are the concurrent sessions of the 0 ms sweep.
	ZeroSessions []int
	// ZeroTurns is how many turns the 0 ms scenarios run in total.
	ZeroTurns int
	// TurnsPerSession bounds a session's length: a client moves to a new
	// session after that many turns, as conversations are consolidated
	// long before they reach thousands of turns.
	TurnsPerSession int

	// SlowLatency is the model latency of the slots and workers suites.
	SlowLatency time.Duration
	// SlotSessions are the concurrent sessions of the slow-model sweep.
	SlotSessions []int
	// SlotTurns is each session's turns in the slow-model sweep.
	SlotTurns int
	// Slots is turnsPerWorker of the slow-model all-in-one (one worker).
	Slots int

	// ShippedSessions are the concurrent sessions of the "all-in-one as
	// shipped" suite: the binary with no worker settings, at SlowLatency.
	ShippedSessions []int
	// ShippedTurns is each session's turns in that suite.
	ShippedTurns int

	// TTFTSessions are the concurrent sessions of the time-to-first-token
	// suite, TTFTTurns each session's measured turns (raised so that a
	// run measures at least 200), and TTFTRest how
	// long the streaming model takes after its first chunk.
	TTFTSessions []int
	TTFTTurns    int
	TTFTRest     time.Duration

	// OneShotRuns is how many times each mode of `agent -m` runs.
	OneShotRuns int

	// WorkerCounts are the agent-worker process counts to compare.
	WorkerCounts []int
	// SlotsPerWorker is turnsPerWorker of every worker process.
	SlotsPerWorker int
	// WorkerSessions and WorkerTurns size the workers suite's load.
	WorkerSessions, WorkerTurns int

	// MemorySessions are the memory suite's steps of idle sessions (one
	// turn each): RSS is read at each, and the cost of an idle session is
	// the slope over them.
	MemorySessions []int
	// TurnSessions, TurnsFirst and TurnsAll: RSS is read after TurnsFirst
	// and after TurnsAll turns over the same TurnSessions sessions; it
	// should not grow with turns.
	TurnSessions, TurnsFirst, TurnsAll int
	// TurnsContextWindow is agents.defaults.contextWindowTokens of the
	// turns' fleet (maxTokens a quarter of it), TurnsAnswerBytes the length
	// of the fake model's answers. A session's unconsolidated history is
	// bounded by the context budget, not by its turns: with answers of a
	// realistic length and a window this size, consolidation keeps every
	// session's history at its steady state from the first reading on, as
	// in a long real conversation. 0 keeps the fleet's window (200,000
	// tokens) and 0 answers "ok": then no session reaches the budget in
	// the suite's turns, each turn loads its session's whole history, and
	// RSS follows history length.
	TurnsContextWindow, TurnsAnswerBytes int
	// MemoryConcurrency is how many sessions talk at once in the memory
	// suite.
	MemoryConcurrency int
	// MemoryWindow is the memory suite fleet's duplicate windows. The
	// server holds every message id of the window in memory, memory that
	// follows the message rate, not the number of sessions; RSS is read
	// after the window has passed, so that a default ten-minute window does
	// not make the suite wait ten minutes per reading. At least
	// bus.MinWindow, which the fleet's configuration requires (the runs up
	// to 2026-11-29 used 20 s).
	MemoryWindow time.Duration
	// MemorySettle is how long the fleet idles before each RSS reading of
	// the memory suite; 0 is MemoryWindow + 70 s (see settleAfterLoad).
	MemorySettle time.Duration

	// Settle is how long a process idles before its RSS is read.
	Settle time.Duration
	// Baseline runs each all-in-one scenario's turns again through the
	// agent loop alone, without the bus.
	Baseline bool
}

// DefaultConfig is the run `make bench` does; the memory suite alone
// idles 90 s before each of its ten RSS readings.
func DefaultConfig() Config {
	return Config{
		Suites:          slices.Clone(AllSuites),
		ZeroSessions:    []int{1, 10, 100},
		ZeroTurns:       6000,
		TurnsPerSession: 20,
		SlowLatency:     500 * time.Millisecond,
		SlotSessions:    []int{10, 100, 1000},
		SlotTurns:       5,
		Slots:           256,
		ShippedSessions: []int{10, 50, 200, 1000},
		ShippedTurns:    3,
		TTFTSessions:    []int{1, 200},
		TTFTTurns:       5,
		TTFTRest:        50 * time.Millisecond,
		OneShotRuns:     5,
		WorkerCounts:    []int{1, 2, 4},
		SlotsPerWorker:  16,
		WorkerSessions:  128,
		WorkerTurns:     8,
		MemorySessions:  []int{1000, 10_000, 50_000},
		TurnSessions:    100,
		TurnsFirst:      1000,
		TurnsAll:        100_000,
		// About 510 tokens a turn against a consolidation share of
		// 3,072 (half of 8,192 − 2,048): a session's history is
		// consolidated every few turns.
		TurnsContextWindow: 8192,
		TurnsAnswerBytes:   2000,
		MemoryConcurrency:  100,
		MemoryWindow:       bus.MinWindow,
		Settle:             5 * time.Second,
		Baseline:           true,
	}
}

// Validate reports every invalid setting by its flag name.
func (c Config) Validate() error {
	var errs []error
	for _, s := range c.Suites {
		if !slices.Contains(AllSuites, s) {
			errs = append(errs, fmt.Errorf("--suites: unknown suite %q (have %v)", s, AllSuites))
		}
	}
	positive := func(name string, vs ...int) error {
		for _, v := range vs {
			if v < 1 {
				return fmt.Errorf("%s: must be at least 1, got %d", name, v)
			}
		}
		return nil
	}
	return errors.Join(append(errs,
		positive("--zero-sessions", c.ZeroSessions...),
		positive("--zero-turns", c.ZeroTurns),
		positive("--turns-per-session", c.TurnsPerSession),
		positive("--slot-sessions", c.SlotSessions...),
		positive("--slot-turns", c.SlotTurns),
		positive("--slots", c.Slots),
		positive("--shipped-sessions", c.ShippedSessions...),
		positive("--shipped-turns", c.ShippedTurns),
		positive("--ttft-sessions", c.TTFTSessions...),
		positive("--ttft-turns", c.TTFTTurns),
		positive("--oneshot-runs", c.OneShotRuns),
		positive("--workers", c.WorkerCounts...),
		positive("--slots-per-worker", c.SlotsPerWorker),
		positive("--worker-sessions", c.WorkerSessions),
		positive("--worker-turns", c.WorkerTurns),
		positive("--memory-sessions", c.MemorySessions...),
		positive("--turn-sessions", c.TurnSessions),
		positive("--turns-first", c.TurnsFirst),
		positive("--memory-concurrency", c.MemoryConcurrency),
		func() error {
			if !slices.IsSorted(c.MemorySessions) || len(slices.Compact(slices.Clone(c.MemorySessions))) != len(c.MemorySessions) {
				return fmt.Errorf("--memory-sessions: %v must be increasing", c.MemorySessions)
			}
			return nil
		}(),
		func() error {
			if c.TurnsContextWindow != 0 && c.TurnsContextWindow < 1024 {
				return fmt.Errorf("--turns-context-window: %d is below 1024 (0: the fleet's default)", c.TurnsContextWindow)
			}
			if c.TurnsAnswerBytes < 0 {
				return errors.New("--turns-answer-bytes: must not be negative")
			}
			return nil
		}(),
		func() error {
			if c.TurnsAll <= c.TurnsFirst {
				return fmt.Errorf("--turns-all: %d must exceed --turns-first %d", c.TurnsAll, c.TurnsFirst)
			}
			if c.TurnsFirst < c.TurnSessions {
				return fmt.Errorf("--turns-first: %d is below --turn-sessions %d (a turn per session at least)", c.TurnsFirst, c.TurnSessions)
			}
			if c.MemoryWindow < bus.MinWindow {
				return fmt.Errorf("--memory-window: %s is below %s, the fleet's shortest duplicate window", c.MemoryWindow, bus.MinWindow)
			}
			if c.MemorySettle < 0 {
				return errors.New("--memory-settle: must not be negative")
			}
			if c.SlowLatency <= 0 {
				return errors.New("--latency: must be positive")
			}
			return nil
		}(),
	)...)
}

// memorySettle is the idle time before each reading of the memory suite.
func (c Config) memorySettle() time.Duration {
	if c.MemorySettle > 0 {
		return c.MemorySettle
	}
	return settleAfterLoad(c.MemoryWindow)
}

func (c Config) has(suite string) bool { return slices.Contains(c.Suites, suite) }
