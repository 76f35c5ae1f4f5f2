package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/services/agent-worker/worker"
)

// Options are what the config does not say.
type Options struct {
	// Progress receives a line per scenario as the run goes; nil discards.
	Progress io.Writer
	// BinDir holds prebuilt binaries (agent-worker, tool-runner,
	// memory-consolidator, channel-gateway, nanofleet, nats-server);
	// empty builds them from Config.Root into a temp dir.
	BinDir string
	// Command is recorded in the report as the command that produced it.
	Command string
}

// driver is one bench run.
type driver struct {
	cfg      Config
	opts     Options
	tmp      string
	fleetLog *slog.Logger
	report   *Report

	binsOnce sync.Once
	bins     binaries
	binsErr  error
}

// Run runs the configured suites and returns what they measured. A
// scenario that fails is recorded in Report.Failures and the run goes on;
// Run fails only when nothing could be measured or ctx ended. fleetLog
// receives the in-process fleet's logs; nil discards.
func Run(ctx context.Context, cfg Config, o Options, fleetLog *slog.Logger) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	tmp, err := os.MkdirTemp("", "nanofleet-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	r := &driver{cfg: cfg, opts: o, tmp: tmp, fleetLog: observe.OrDiscard(fleetLog), report: &Report{
		Command: o.Command, Machine: machine(), Started: start.UTC().Format(time.RFC3339), Config: cfg.json(),
	}}
	for _, suite := range AllSuites {
		if !cfg.has(suite) || ctx.Err() != nil {
			continue
		}
		r.logf("== %s", suite)
		switch suite {
		case SuiteIdle:
			idle, err := r.idle(ctx)
			if err != nil {
				r.fail("idle: %v", err)
			}
			r.report.Idle = idle
		case SuiteTTFT:
			res, err := r.ttft(ctx)
			if err != nil {
				r.fail("ttft: %v", err)
			}
			r.report.TTFT = append(r.report.TTFT, res...)
		case SuiteOneShot:
			res, err := r.oneShot(ctx)
			if err != nil {
				r.fail("oneshot: %v", err)
			}
			r.report.OneShot = append(r.report.OneShot, res...)
		case SuiteMemory:
			for _, shape := range []string{shapeAllInOne, shapeMultiProcess} {
				if ctx.Err() != nil {
					break
				}
				m, err := r.memory(ctx, shape)
				if err != nil {
					r.fail("memory (%s): %v", shape, err)
					continue
				}
				r.report.Memory = append(r.report.Memory, m)
			}
		default:
			for _, sc := range r.scenarios(suite) {
				if ctx.Err() != nil {
					break
				}
				r.runScenario(ctx, sc)
			}
		}
	}
	r.report.DurationS = time.Since(start).Seconds()
	if err := ctx.Err(); err != nil {
		return r.report, err
	}
	if len(r.report.Scenarios) == 0 && len(r.report.Idle) == 0 && len(r.report.Memory) == 0 && len(r.report.TTFT) == 0 && len(r.report.OneShot) == 0 {
		return r.report, fmt.Errorf("nothing was measured: %s", strings.Join(r.report.Failures, "; "))
	}
	return r.report, nil
}

// scenarios lists a load suite's scenarios.
func (r *driver) scenarios(suite string) []scenario {
	c := r.cfg
	const defaultSlots, defaultLimit = 16, 4096
	var out []scenario
	switch suite {
	case SuiteZero:
		chats := max(1, c.ZeroTurns/c.TurnsPerSession)
		for _, s := range c.ZeroSessions {
			out = append(out, scenario{
				suite: suite, name: fmt.Sprintf("aio 0ms s=%d", s), shape: ShapeAllInOne, workers: 1,
				slots: defaultSlots, limit: defaultLimit, baseline: c.Baseline,
				load: load{Concurrency: s, Chats: chats, TurnsPerChat: c.TurnsPerSession, Prefix: fmt.Sprint("z", s)},
			})
		}
		for _, s := range c.ZeroSessions {
			out = append(out, scenario{
				suite: suite, name: fmt.Sprintf("aio-bin 0ms s=%d", s), shape: ShapeAllInOneBinary, workers: 1,
				slots: defaultSlots, limit: defaultLimit,
				load: load{Concurrency: s, Chats: chats, TurnsPerChat: c.TurnsPerSession, Prefix: fmt.Sprint("zb", s)},
			})
		}
		top := c.ZeroSessions[len(c.ZeroSessions)-1]
		out = append(out,
			scenario{
				suite: suite, name: fmt.Sprintf("aio 0ms s=%d +read_file", top), shape: ShapeAllInOne, workers: 1,
				slots: defaultSlots, limit: defaultLimit, tool: true, baseline: c.Baseline,
				load: load{Concurrency: top, Chats: max(1, chats/2), TurnsPerChat: c.TurnsPerSession, Prefix: "zt"},
			},
			scenario{
				suite: suite, name: fmt.Sprintf("mp 0ms w=1 s=%d", top), shape: ShapeMultiProcess, workers: 1,
				slots: defaultSlots, limit: defaultLimit,
				load: load{Concurrency: top, Chats: chats, TurnsPerChat: c.TurnsPerSession, Prefix: "zm"},
			})
	case SuiteSlots:
		for _, s := range c.SlotSessions {
			out = append(out, scenario{
				suite: suite, name: fmt.Sprintf("aio %s s=%d", c.SlowLatency, s), shape: ShapeAllInOne, workers: 1,
				slots: c.Slots, limit: max(defaultLimit, c.Slots), latency: c.SlowLatency,
				// The baseline has no turn slots: compare only where the
				// slots do not bound the fleet.
				baseline: c.Baseline && s <= c.Slots,
				load:     load{Concurrency: s, Chats: s, TurnsPerChat: c.SlotTurns, Prefix: fmt.Sprint("l", s)},
			})
		}
	case SuiteShipped:
		d := worker.DefaultConfig()
		for _, s := range c.ShippedSessions {
			out = append(out, scenario{
				suite: suite, name: fmt.Sprintf("shipped %s s=%d", c.SlowLatency, s), shape: ShapeAllInOneBinary, workers: 1,
				slots: d.Slots, limit: d.FleetTurnLimit, shipped: true, latency: c.SlowLatency,
				load: load{Concurrency: s, Chats: s, TurnsPerChat: c.ShippedTurns, Prefix: fmt.Sprint("as", s)},
			})
		}
	case SuiteWorkers:
		for _, k := range c.WorkerCounts {
			out = append(out, scenario{
				suite: suite, name: fmt.Sprintf("mp %s w=%d s=%d", c.SlowLatency, k, c.WorkerSessions), shape: ShapeMultiProcess,
				workers: k, slots: c.SlotsPerWorker, limit: defaultLimit, latency: c.SlowLatency,
				load: load{Concurrency: c.WorkerSessions, Chats: c.WorkerSessions, TurnsPerChat: c.WorkerTurns, Prefix: fmt.Sprint("w", k)},
			})
		}
	}
	return out
}

func (r *driver) runScenario(ctx context.Context, sc scenario) {
	var res Result
	var err error
	switch sc.shape {
	case ShapeMultiProcess:
		res, err = r.multiProcess(ctx, sc)
	case ShapeAllInOneBinary:
		res, err = r.allInOneBinary(ctx, sc)
	default:
		res, err = r.allInOne(ctx, sc)
	}
	if err != nil {
		r.fail("%s: %v", sc.name, err)
		return
	}
	if sc.baseline {
		b, err := r.baseline(ctx, sc, res)
		if err != nil {
			r.fail("%s baseline: %v", sc.name, err)
		}
		res.Baseline = b
	}
	r.report.Scenarios = append(r.report.Scenarios, res)
}

// binaries builds the service binaries once (or uses Options.BinDir).
func (r *driver) binaries(ctx context.Context) (binaries, error) {
	r.binsOnce.Do(func() {
		if r.opts.BinDir != "" {
			r.bins = binaries{dir: r.opts.BinDir}
			return
		}
		r.logf("  building the service binaries")
		r.bins, r.binsErr = buildBinaries(ctx, r.cfg.Root, r.tmp,
			"nats-server", "agent-worker", "tool-runner", "memory-consolidator", "channel-gateway", "nanofleet")
	})
	return r.bins, r.binsErr
}

func (r *driver) logf(format string, args ...any) {
	fmt.Fprintf(r.opts.Progress, format+"\n", args...)
}

func (r *driver) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.report.Failures = append(r.report.Failures, msg)
	r.logf("  FAILED: %s", msg)
}

// machine describes this machine from /proc.
func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if kb, err := memKB0("/proc/meminfo", "MemTotal"); err == nil {
		m.MemoryGiB = float64(kb) / (1 << 20)
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	return m
}

// memKB0 reads a "Field: N kB" line of a /proc file.
func memKB0(path, field string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int64
			_, err := fmt.Sscan(rest, &kb)
			return kb, err
		}
	}
	return 0, fmt.Errorf("%s: no %s", path, field)
}
