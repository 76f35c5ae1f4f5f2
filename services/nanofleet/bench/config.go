package bench

import (
	"errors"
	"fmt"
	"slices"
	"time"
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
	SuiteGrowth  = "growth"  // RSS after many turns over many sessions
)

// AllSuites is every suite in running order.
var AllSuites = []string{SuiteZero, SuiteSlots, SuiteShipped, SuiteTTFT, SuiteOneShot, SuiteWorkers, SuiteIdle, SuiteGrowth}

// Config is one bench run. Every size is a flag of `nanofleet bench`, so
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

	// GrowthFirst, GrowthTurns and GrowthSessions: RSS is read after the
	// first GrowthFirst turns and after GrowthTurns turns spread over
	// GrowthSessions sessions.
	GrowthFirst, GrowthTurns, GrowthSessions int
	// GrowthConcurrency is how many sessions talk at once in the growth
	// suite.
	GrowthConcurrency int
	// GrowthWindow is the growth suite fleet's duplicate windows. The
	// server holds every message id of the window in memory, memory that
	// follows the message rate, not the number of sessions; RSS is read
	// after the window has passed, so that a default ten-minute window does
	// not make the suite wait ten minutes per reading.
	GrowthWindow time.Duration

	// Settle is how long a process idles before its RSS is read.
	Settle time.Duration
	// Baseline runs each all-in-one scenario's turns again through the
	// agent loop alone, without the bus.
	Baseline bool
}

// DefaultConfig is the run `make bench` does; it takes about five minutes
// on a 2-core machine.
func DefaultConfig() Config {
	return Config{
		Suites:            slices.Clone(AllSuites),
		ZeroSessions:      []int{1, 10, 100},
		ZeroTurns:         6000,
		TurnsPerSession:   20,
		SlowLatency:       500 * time.Millisecond,
		SlotSessions:      []int{10, 100, 1000},
		SlotTurns:         5,
		Slots:             256,
		ShippedSessions:   []int{10, 50, 200, 1000},
		ShippedTurns:      3,
		TTFTSessions:      []int{1, 200},
		TTFTTurns:         5,
		TTFTRest:          50 * time.Millisecond,
		OneShotRuns:       5,
		WorkerCounts:      []int{1, 2, 4},
		SlotsPerWorker:    16,
		WorkerSessions:    128,
		WorkerTurns:       8,
		GrowthFirst:       1000,
		GrowthTurns:       100_000,
		GrowthSessions:    10_000,
		GrowthConcurrency: 100,
		GrowthWindow:      20 * time.Second,
		Settle:            5 * time.Second,
		Baseline:          true,
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
		positive("--growth-first", c.GrowthFirst),
		positive("--growth-sessions", c.GrowthSessions),
		positive("--growth-concurrency", c.GrowthConcurrency),
		func() error {
			if c.GrowthTurns <= c.GrowthFirst {
				return fmt.Errorf("--growth-turns: %d must exceed --growth-first %d", c.GrowthTurns, c.GrowthFirst)
			}
			if c.GrowthWindow < 2*time.Second {
				return fmt.Errorf("--growth-window: %s is below 2s", c.GrowthWindow)
			}
			if c.SlowLatency <= 0 {
				return errors.New("--latency: must be positive")
			}
			return nil
		}(),
	)...)
}

func (c Config) has(suite string) bool { return slices.Contains(c.Suites, suite) }
