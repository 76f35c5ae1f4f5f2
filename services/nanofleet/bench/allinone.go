package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// fleetSettings are what a scenario sets in the fleet's config file.
type fleetSettings struct {
	modelURL string
	// slots and limit set the worker section; zero leaves it out, so the
	// fleet runs at its defaults.
	slots    int
	limit    int
	natsPort int
	// windows, if set, is the inbound and replay duplicate window (and
	// twice the lease TTL): the growth suite shortens it so that it can
	// read RSS after the window's message ids are gone.
	windows time.Duration
	// contextWindow, if set, is agents.defaults.contextWindowTokens, with
	// maxTokens a quarter of it.
	contextWindow int
}

// configJSON is the fleet's config file: the fake model as the custom
// provider, the worker's turn slots, the NATS port of an all-in-one that
// other processes join. Everything else keeps its default.
func (s fleetSettings) configJSON() ([]byte, error) {
	worker := map[string]any{}
	if s.slots > 0 {
		worker["turnsPerWorker"] = s.slots
		worker["fleetTurnLimit"] = max(s.limit, s.slots)
	}
	nats := map[string]any{}
	if s.natsPort != 0 {
		nats["port"] = s.natsPort
	}
	if w := int(s.windows.Seconds()); w > 0 {
		nats["duplicateWindowSeconds"] = w
		nats["replayWindowSeconds"] = w
		nats["leaseTtlSeconds"] = max(1, w/2)
	}
	defaults := map[string]any{"model": "fake-model"}
	if s.contextWindow > 0 {
		defaults["contextWindowTokens"] = s.contextWindow
		defaults["maxTokens"] = s.contextWindow / 4
	}
	return json.MarshalIndent(map[string]any{
		"agents":    map[string]any{"defaults": defaults},
		"providers": map[string]any{"custom": map[string]any{"apiKey": "bench", "apiBase": s.modelURL}},
		"nats":      nats,
		"worker":    worker,
	}, "", "  ")
}

// write writes the config file into dir and returns its path and parsed
// form.
func (s fleetSettings) write(dir string) (string, *config.File, error) {
	data, err := s.configJSON()
	if err != nil {
		return "", nil, err
	}
	f := config.Defaults()
	if err := config.Parse(f, data, noEnv); err != nil {
		return "", nil, fmt.Errorf("bench config: %w", err)
	}
	path := filepath.Join(dir, "config.json")
	return path, f, os.WriteFile(path, data, 0o644)
}

// noEnv keeps the bench's fleets from reading the caller's OPENAI_* or
// NANOFLEET_* variables.
func noEnv(string) string { return "" }

// prepareWorkspace creates the workspace with the file the tool call reads.
func prepareWorkspace(dir string) (string, error) {
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return "", err
	}
	return ws, os.WriteFile(filepath.Join(ws, benchFile), []byte("nanofleet bench\nline two\n"), 0o644)
}

// scenario is one load against one fleet.
type scenario struct {
	suite, name string
	shape       string
	workers     int
	slots       int
	limit       int
	latency     time.Duration
	tool        bool
	// shipped runs the fleet without worker settings: slots and limit
	// are then the defaults, for the report only.
	shipped  bool
	load     load
	baseline bool
}

// allInOne runs sc against the fleet in this process: embedded NATS, the
// tool runner, one agent worker with sc.slots slots. The process figures
// are the bench process's, so they include the load generator and the
// fake model.
func (r *driver) allInOne(ctx context.Context, sc scenario) (Result, error) {
	bed, err := r.scenarioBed("aio-", sc)
	if err != nil {
		return Result{}, err
	}
	defer bed.close()
	f, err := fleet.Start(ctx, fleet.Options{
		File: bed.file, Getenv: noEnv, DataDir: filepath.Join(bed.dir, "data"), Workspace: bed.ws, Workers: sc.workers,
	}, fleet.WithLogger(r.fleetLog))
	if err != nil {
		return Result{}, fmt.Errorf("start all-in-one: %w", err)
	}
	defer f.Stop()
	c, err := fleet.NewClient(ctx, f.Bus, "bench")
	if err != nil {
		return Result{}, err
	}
	defer c.Close()
	turn := fleetTurn(c)
	if err := warmUp(ctx, turn, sc); err != nil {
		return Result{}, err
	}
	self := os.Getpid()
	_ = resetPeak(self)
	meter := startCPU(self)
	s := sc.load.run(ctx, turn)
	cpu, other := meter.stop()
	peak, _ := memKB(self, "VmHWM")
	res := r.result(sc, s, other)
	res.Procs = []ProcStat{procStat("bench process (fleet + load + fake model)", peak, cpu[0], s.Elapsed)}
	return res, nil
}

// warmUp runs a turn in as many sessions as the scenario has slots (at
// most 32), so that connections, consumers and caches are warm.
func warmUp(ctx context.Context, turn turnFunc, sc scenario) error {
	n := min(32, sc.load.Concurrency, max(1, sc.workers*sc.slots))
	s := load{Concurrency: n, Chats: n, TurnsPerChat: 2, Prefix: "warm-" + sc.name}.run(ctx, turn)
	if s.Errors > 0 {
		return fmt.Errorf("warm-up: %d of %d turns failed: %w", s.Errors, 2*n, s.FirstErr)
	}
	return nil
}

func procStat(name string, peakKB int64, cpu, elapsed time.Duration) ProcStat {
	return ProcStat{Name: name, PeakRSSMB: mb(peakKB), CPUS: cpu.Seconds(), CPUPercent: 100 * cpu.Seconds() / elapsed.Seconds()}
}

// result turns a sample into the scenario's figures (without processes).
func (r *driver) result(sc scenario, s sample, otherCPU float64) Result {
	calls := callsPerTurn(sc.tool)
	model := time.Duration(calls) * sc.latency
	over := make([]time.Duration, len(s.Latencies))
	for i, d := range s.Latencies {
		over[i] = d - model
	}
	res := Result{
		Suite: sc.suite, Name: sc.name, Shape: sc.shape, Workers: sc.workers, SlotsPerWorker: sc.slots,
		FleetTurnLimit: max(sc.limit, sc.slots), Sessions: sc.load.Concurrency, Chats: sc.load.Chats,
		Turns: len(s.Latencies), Errors: s.Errors, ModelLatencyMs: ms(sc.latency), ModelCallsPerTurn: calls,
		ElapsedS: s.Elapsed.Seconds(), TurnsPerS: float64(len(s.Latencies)) / s.Elapsed.Seconds(),
		LatencyMs: percentiles(s.Latencies), OverheadMs: percentiles(over), OtherCPUPercent: otherCPU,
	}
	if sc.tool {
		res.ToolCallsPerTurn = 1
	}
	if s.FirstErr != nil {
		res.FirstError = s.FirstErr.Error()
	}
	if sc.latency > 0 {
		slots := min(sc.load.Concurrency, sc.workers*sc.slots, max(sc.limit, sc.slots))
		res.IdealTurnsPerS = float64(slots) / model.Seconds()
	}
	r.logf("  %-28s %8.1f turns/s  p50 %7.1f ms  p99 %7.1f ms  overhead p50 %6.1f ms p99 %6.1f ms  errors %d  others' CPU %.0f%%",
		sc.name, res.TurnsPerS, res.LatencyMs.P50, res.LatencyMs.P99, res.OverheadMs.P50, res.OverheadMs.P99, res.Errors, otherCPU)
	return res
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
