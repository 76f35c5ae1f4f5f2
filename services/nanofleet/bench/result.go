package bench

import (
	"slices"
	"time"
)

// Report is everything a bench run measured; it is written as JSON and
// rendered as Markdown and SVG.
type Report struct {
	// Command that produced the report.
	Command string `json:"command"`
	// Machine the figures were measured on.
	Machine Machine `json:"machine"`
	// Started is when the run began (UTC, RFC 3339).
	Started string `json:"started"`
	// DurationS is the whole run's wall time.
	DurationS float64 `json:"duration_s"`
	// Config is the run's settings.
	Config ConfigJSON `json:"config"`

	Scenarios []Result  `json:"scenarios"`
	Idle      []IdleRSS `json:"idle_rss,omitempty"`
	// Growth is the memory suite as it was before 2026-11-25 (RSS after
	// many turns over many sessions), kept to render older results.
	Growth  []*Growth `json:"growth,omitempty"`
	Memory  []*Memory `json:"memory,omitempty"`
	TTFT    []TTFT    `json:"ttft,omitempty"`
	OneShot []OneShot `json:"oneshot,omitempty"`
	// Failures are suites or scenarios that could not run, with why.
	Failures []string `json:"failures,omitempty"`
}

// Machine describes where the bench ran.
type Machine struct {
	CPU       string  `json:"cpu"`
	Cores     int     `json:"cores"`
	MemoryGiB float64 `json:"memory_gib"`
	Kernel    string  `json:"kernel"`
	GoVersion string  `json:"go_version"`
}

// ConfigJSON is Config with durations in milliseconds.
type ConfigJSON struct {
	Suites             []string `json:"suites"`
	ZeroSessions       []int    `json:"zero_sessions"`
	ZeroTurns          int      `json:"zero_turns"`
	TurnsPerSession    int      `json:"turns_per_session"`
	SlowLatencyMs      float64  `json:"slow_latency_ms"`
	SlotSessions       []int    `json:"slot_sessions"`
	SlotTurns          int      `json:"slot_turns"`
	Slots              int      `json:"slots"`
	ShippedSessions    []int    `json:"shipped_sessions,omitempty"`
	ShippedTurns       int      `json:"shipped_turns,omitempty"`
	TTFTSessions       []int    `json:"ttft_sessions,omitempty"`
	TTFTTurns          int      `json:"ttft_turns,omitempty"`
	WorkerCounts       []int    `json:"worker_counts"`
	SlotsPerWorker     int      `json:"slots_per_worker"`
	WorkerSessions     int      `json:"worker_sessions"`
	WorkerTurns        int      `json:"worker_turns"`
	GrowthFirst        int      `json:"growth_first"`
	GrowthTurns        int      `json:"growth_turns"`
	GrowthSessions     int      `json:"growth_sessions"`
	GrowthConcurrency  int      `json:"growth_concurrency"`
	GrowthWindowMs     float64  `json:"growth_window_ms"`
	MemorySessions     []int    `json:"memory_sessions,omitempty"`
	TurnSessions       int      `json:"turn_sessions,omitempty"`
	TurnsFirst         int      `json:"turns_first,omitempty"`
	TurnsAll           int      `json:"turns_all,omitempty"`
	TurnsContextWindow int      `json:"turns_context_window,omitempty"`
	TurnsAnswerBytes   int      `json:"turns_answer_bytes,omitempty"`
	MemoryConcurrency  int      `json:"memory_concurrency,omitempty"`
	MemoryWindowMs     float64  `json:"memory_window_ms,omitempty"`
	SettleMs           float64  `json:"settle_ms"`
	Baseline           bool     `json:"baseline"`
}

func (c Config) json() ConfigJSON {
	return ConfigJSON{
		Suites: c.Suites, ZeroSessions: c.ZeroSessions, ZeroTurns: c.ZeroTurns, TurnsPerSession: c.TurnsPerSession,
		SlowLatencyMs: ms(c.SlowLatency), SlotSessions: c.SlotSessions, SlotTurns: c.SlotTurns, Slots: c.Slots,
		ShippedSessions: c.ShippedSessions, ShippedTurns: c.ShippedTurns,
		TTFTSessions: c.TTFTSessions, TTFTTurns: c.TTFTTurns,
		WorkerCounts: c.WorkerCounts, SlotsPerWorker: c.SlotsPerWorker, WorkerSessions: c.WorkerSessions,
		WorkerTurns: c.WorkerTurns, MemorySessions: c.MemorySessions, TurnSessions: c.TurnSessions,
		TurnsFirst: c.TurnsFirst, TurnsAll: c.TurnsAll, MemoryConcurrency: c.MemoryConcurrency,
		TurnsContextWindow: c.TurnsContextWindow, TurnsAnswerBytes: c.TurnsAnswerBytes,
		MemoryWindowMs: ms(c.MemoryWindow), SettleMs: ms(c.Settle),
		Baseline: c.Baseline,
	}
}

// Shapes of a fleet under test.
const (
	// ShapeAllInOne runs the all-in-one in the bench process.
	ShapeAllInOne = "all-in-one"
	// ShapeAllInOneBinary runs the `nanofleet run` binary as its own
	// process, driven over NATS on loopback.
	ShapeAllInOneBinary = "all-in-one binary"
	// ShapeMultiProcess runs nats-server, tool-runner and agent-worker
	// processes.
	ShapeMultiProcess = "multi-process"
)

// Result is one load scenario.
type Result struct {
	Suite string `json:"suite"`
	Name  string `json:"name"`
	Shape string `json:"shape"`
	// Workers is the number of agent workers (processes when
	// multi-process), each with SlotsPerWorker turn slots.
	Workers        int `json:"workers"`
	SlotsPerWorker int `json:"slots_per_worker"`
	FleetTurnLimit int `json:"fleet_turn_limit"`
	// Sessions is how many sessions talk at once; Chats how many distinct
	// sessions the load used.
	Sessions int `json:"sessions"`
	Chats    int `json:"chats"`
	// Turns measured (warm-up excluded) and how many failed.
	Turns  int `json:"turns"`
	Errors int `json:"errors"`
	// FirstError is the first failure, if any.
	FirstError string `json:"first_error,omitempty"`
	// ModelLatencyMs is the fake model's configured latency per call.
	ModelLatencyMs    float64 `json:"model_latency_ms"`
	ModelCallsPerTurn int     `json:"model_calls_per_turn"`
	ToolCallsPerTurn  int     `json:"tool_calls_per_turn"`
	ElapsedS          float64 `json:"elapsed_s"`
	TurnsPerS         float64 `json:"turns_per_s"`
	// IdealTurnsPerS is min(sessions, turn slots) / model time per turn,
	// when the model has latency.
	IdealTurnsPerS float64 `json:"ideal_turns_per_s,omitempty"`
	// Latency from publishing the inbound message to receiving the
	// turn's final reply.
	LatencyMs Percentiles `json:"latency_ms"`
	// OverheadMs is latency minus the model's configured time per turn:
	// what the bus, the turn protocol, the worker, the tool runner and
	// the HTTP round trips to the fake model cost.
	OverheadMs Percentiles `json:"overhead_ms"`
	Baseline   *Baseline   `json:"baseline,omitempty"`
	// OtherCPUPercent is the CPU the rest of the machine used during the
	// load (100 = one core): anything above a few percent means the
	// figures were measured on a busy machine.
	OtherCPUPercent float64 `json:"other_cpu_pct"`
	// Procs are the processes' peak RSS and CPU during the scenario.
	Procs []ProcStat `json:"procs"`
}

// Baseline is the same load run through the agent loop directly, with
// the same fake model and tool, without NATS.
type Baseline struct {
	TurnsPerS float64     `json:"turns_per_s"`
	LatencyMs Percentiles `json:"latency_ms"`
	// ThroughputRatio is fleet turns/s over baseline turns/s; P50Ratio
	// is fleet p50 latency over baseline p50 latency.
	ThroughputRatio float64 `json:"throughput_ratio"`
	P50Ratio        float64 `json:"p50_ratio"`
	// BusP50Ms and BusP99Ms are the fleet's p50 and p99 latency minus the
	// baseline's: what the bus and the turn protocol add to the same turn.
	BusP50Ms        float64 `json:"bus_p50_ms"`
	BusP99Ms        float64 `json:"bus_p99_ms"`
	Errors          int     `json:"errors"`
	OtherCPUPercent float64 `json:"other_cpu_pct"`
}

// ProcStat is one process's resources over a scenario.
type ProcStat struct {
	Name string `json:"name"`
	// PeakRSSMB is VmHWM: the process's peak resident memory.
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// CPUS is user+system CPU seconds during the measured load.
	CPUS float64 `json:"cpu_s"`
	// CPUPercent is CPUS over the load's wall time (100 = one core).
	CPUPercent float64 `json:"cpu_pct"`
}

// IdleRSS is a process's resident memory after start-up, idle.
type IdleRSS struct {
	Name  string  `json:"name"`
	RSSMB float64 `json:"rss_mb"`
	// Note says what else the process holds.
	Note string `json:"note,omitempty"`
}

// Growth is a fleet's RSS after a small and a large number of turns and
// sessions.
type Growth struct {
	Shape       string  `json:"shape"`
	Sessions    int     `json:"sessions"`
	Turns       int     `json:"turns"`
	FirstTurns  int     `json:"first_turns"`
	Concurrency int     `json:"concurrency"`
	SettleS     float64 `json:"settle_s"`
	TurnsPerS   float64 `json:"turns_per_s"`
	Errors      int     `json:"errors"`
	StoreMB     float64 `json:"store_mb"`
	ElapsedS    float64 `json:"elapsed_s"`
	FirstError  string  `json:"first_error,omitempty"`
	// OtherCPUPercent is the CPU the rest of the machine used meanwhile.
	OtherCPUPercent float64      `json:"other_cpu_pct"`
	Procs           []GrowthProc `json:"processes"`
}

// GrowthProc is one process's RSS in a growth run.
type GrowthProc struct {
	Name string `json:"name"`
	// Service: a nanofleet binary (not nats-server).
	Service      bool      `json:"service"`
	RSSFirstMB   float64   `json:"rss_after_first_mb"`
	RSSAllMB     float64   `json:"rss_after_all_mb"`
	PeakRSSMB    float64   `json:"peak_rss_mb"`
	Ratio        float64   `json:"ratio"`
	RSSSamplesMB []float64 `json:"rss_samples_mb,omitempty"`
}

// Memory is a fleet's resident cost per idle session and its RSS growth
// with turns at a fixed session count.
type Memory struct {
	Shape        string  `json:"shape"`
	Concurrency  int     `json:"concurrency"`
	SettleS      float64 `json:"settle_s"`
	TurnSessions int     `json:"turn_sessions"`
	TurnsFirst   int     `json:"turns_first"`
	TurnsAll     int     `json:"turns_all"`
	// Turns, Errors, ElapsedS and TurnsPerS cover both parts.
	Turns      int     `json:"turns"`
	Errors     int     `json:"errors"`
	ElapsedS   float64 `json:"elapsed_s"`
	TurnsPerS  float64 `json:"turns_per_s"`
	StoreMB    float64 `json:"store_mb"`
	FirstError string  `json:"first_error,omitempty"`
	// OtherCPUPercent is the CPU the rest of the machine used meanwhile.
	OtherCPUPercent float64      `json:"other_cpu_pct"`
	Procs           []MemoryProc `json:"processes"`
	// TurnsHistory is the turns' sessions' unconsolidated history at each
	// of the two readings, what a turn loads; Consolidations the history
	// log's entries at the end, one per consolidated range.
	TurnsHistory   []HistoryState `json:"turns_history,omitempty"`
	Consolidations uint64         `json:"consolidations"`
}

// HistoryState is the unconsolidated history of a set of sessions.
type HistoryState struct {
	// MeanTurns and MaxTurns are turns after the consolidation cursor
	// (and after the last /new) per session.
	MeanTurns float64 `json:"mean_turns"`
	MaxTurns  int     `json:"max_turns"`
	// Pending is the consolidation requests not yet done: the consolidator
	// is still catching up when it is not 0.
	Pending uint64 `json:"pending_consolidations"`
}

// MemoryProc is one process's figures in a memory run.
type MemoryProc struct {
	Name string `json:"name"`
	// Service: a nanofleet binary (not nats-server).
	Service bool `json:"service"`
	// SessionRSSMB is the RSS at each step of Config.MemorySessions, and
	// KBPerSession the least-squares slope over them.
	SessionRSSMB []float64 `json:"session_rss_mb"`
	KBPerSession float64   `json:"kb_per_session"`
	// TurnsFirstRSSMB and TurnsAllRSSMB: RSS after TurnsFirst and
	// TurnsAll turns over TurnSessions sessions; TurnsRatio the second
	// over the first.
	TurnsFirstRSSMB float64 `json:"turns_first_rss_mb"`
	TurnsAllRSSMB   float64 `json:"turns_all_rss_mb"`
	TurnsRatio      float64 `json:"turns_ratio"`
	// TurnsFirstAnonMB and TurnsAllAnonMB are the anonymous part of those
	// two readings (RssAnon): the heap, stacks and runtime metadata. The
	// rest is the binary's pages the process has touched, which grow
	// with the code paths run, not with what the process holds.
	TurnsFirstAnonMB float64 `json:"turns_first_anon_mb,omitempty"`
	TurnsAllAnonMB   float64 `json:"turns_all_anon_mb,omitempty"`
	PeakRSSMB        float64 `json:"peak_rss_mb"`
}

// Percentiles of a latency distribution, in milliseconds.
type Percentiles struct {
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) float64 { return ms(s[min(len(s)-1, int(float64(len(s))*p))]) }
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Percentiles{P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: ms(s[len(s)-1]), Mean: ms(sum / time.Duration(len(s)))}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
