// Command bench is the nanofleet load bench: it drives the real fleet with
// a fake model and writes throughput, latency and memory figures (see
// package bench). It lives beside the shipped binary, not in it: it builds
// the binaries it measures from the go.work workspace it runs in.
//
//	cd services/nanofleet && go run ./cmd/bench [flags]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nanofleet/nanofleet/services/nanofleet/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Stderr, os.Args[1:])
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	default:
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run drives the real fleet with a fake model and writes the figures
// (Markdown, JSON, SVG) to --out.
func run(ctx context.Context, stderr io.Writer, args []string) error {
	f, err := parseBenchFlags(stderr, args, bench.DefaultConfig())
	if err != nil {
		return err
	}
	if f.quick { // again over the small sizes, so that explicit flags still win
		if f, err = parseBenchFlags(stderr, args, quickConfig(bench.DefaultConfig())); err != nil {
			return err
		}
	}
	c, out, suites, binDir, logLevel := f.cfg, &f.out, &f.suites, &f.binDir, &f.logLevel
	c.Suites = strings.Split(*suites, ",")
	root, err := workspaceRoot(ctx)
	if err != nil {
		return err
	}
	c.Root = root
	if *out == "" {
		*out = filepath.Join(root, "docs", "bench")
	}
	if f.render {
		rep, err := bench.Read(*out)
		if err != nil {
			return err
		}
		return bench.Write(*out, rep)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	command := "cd services/nanofleet && go run ./cmd/bench"
	if len(args) > 0 {
		command += " " + strings.Join(args, " ")
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Fprintf(stderr, "bench: suites %s; results in %s\n", strings.Join(c.Suites, ","), *out)
	rep, runErr := bench.Run(ctx, c, bench.Options{Progress: stderr, BinDir: *binDir, Command: command},
		slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl})))
	if rep != nil && (runErr == nil || len(rep.Scenarios) > 0) {
		if err := bench.Write(*out, rep); err != nil {
			return errors.Join(runErr, err)
		}
		fmt.Fprintf(stderr, "bench: wrote %s (%.0f s)\n", *out, rep.DurationS)
		if len(rep.Failures) > 0 {
			return errors.Join(runErr, fmt.Errorf("%d scenario(s) failed: %s", len(rep.Failures), strings.Join(rep.Failures, "; ")))
		}
	}
	return runErr
}

// benchFlags are the parsed flags of the bench.
type benchFlags struct {
	cfg                           bench.Config
	out, suites, binDir, logLevel string
	cpuProfile                    string
	quick, render                 bool
}

func parseBenchFlags(stderr io.Writer, args []string, c bench.Config) (*benchFlags, error) {
	f := &benchFlags{cfg: c}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c = f.cfg
	fs.StringVar(&f.out, "out", "", "directory for README.md, results.json and the SVG plot (default: docs/bench of the go.work workspace)")
	fs.StringVar(&f.suites, "suites", strings.Join(bench.AllSuites, ","), "suites to run, comma separated")
	fs.StringVar(&f.binDir, "bin-dir", "", "prebuilt binaries (default: build them from the workspace)")
	fs.StringVar(&f.logLevel, "log-level", "error", "log level of the in-process fleet")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the bench process (the all-in-one scenarios' fleet) to this file")
	fs.BoolVar(&f.render, "render", false, "measure nothing: render README.md and the plot again from --out's results.json")
	fs.BoolVar(&f.quick, "quick", false, "small sizes: a smoke run of every suite in a few minutes")
	p := &f.cfg
	intList(fs, &p.ZeroSessions, "zero-sessions", "concurrent sessions of the 0 ms all-in-one sweep")
	fs.IntVar(&p.ZeroTurns, "zero-turns", c.ZeroTurns, "turns of each 0 ms scenario")
	fs.IntVar(&p.TurnsPerSession, "turns-per-session", c.TurnsPerSession, "turns after which a client moves to a new session (0 ms suite)")
	fs.DurationVar(&p.SlowLatency, "latency", c.SlowLatency, "fake model latency of the slots and workers suites")
	intList(fs, &p.SlotSessions, "slot-sessions", "concurrent sessions of the slow-model all-in-one sweep")
	fs.IntVar(&p.SlotTurns, "slot-turns", c.SlotTurns, "turns per session of the slow-model sweep")
	fs.IntVar(&p.Slots, "slots", c.Slots, "turnsPerWorker of the slow-model all-in-one")
	intList(fs, &p.ShippedSessions, "shipped-sessions", "concurrent sessions of the all-in-one as shipped (no worker settings) at --latency")
	fs.IntVar(&p.ShippedTurns, "shipped-turns", c.ShippedTurns, "turns per session of the all-in-one as shipped")
	intList(fs, &p.TTFTSessions, "ttft-sessions", "concurrent sessions of the time-to-first-token suite")
	fs.IntVar(&p.TTFTTurns, "ttft-turns", c.TTFTTurns, "measured turns per session of the time-to-first-token suite")
	fs.DurationVar(&p.TTFTRest, "ttft-rest", c.TTFTRest, "how long the streaming model takes after its first chunk")
	fs.IntVar(&p.OneShotRuns, "oneshot-runs", c.OneShotRuns, "runs of each mode of `agent -m` in the one-shot suite")
	intList(fs, &p.WorkerCounts, "workers", "agent-worker process counts to compare")
	fs.IntVar(&p.SlotsPerWorker, "slots-per-worker", c.SlotsPerWorker, "turnsPerWorker of each worker process")
	fs.IntVar(&p.WorkerSessions, "worker-sessions", c.WorkerSessions, "concurrent sessions of the workers suite")
	fs.IntVar(&p.WorkerTurns, "worker-turns", c.WorkerTurns, "turns per session of the workers suite")
	intList(fs, &p.MemorySessions, "memory-sessions", "idle sessions (one turn each) at which the memory suite reads RSS; the cost per session is the slope")
	fs.IntVar(&p.TurnSessions, "turn-sessions", c.TurnSessions, "sessions the memory suite's turns go to")
	fs.IntVar(&p.TurnsFirst, "turns-first", c.TurnsFirst, "turns over --turn-sessions after which the first RSS is read")
	fs.IntVar(&p.TurnsAll, "turns-all", c.TurnsAll, "turns over --turn-sessions after which the second RSS is read")
	fs.IntVar(&p.TurnsContextWindow, "turns-context-window", c.TurnsContextWindow, "agents.defaults.contextWindowTokens of the memory suite's turns (maxTokens a quarter of it), so that consolidation bounds each session's history; 0: the fleet's default")
	fs.IntVar(&p.TurnsAnswerBytes, "turns-answer-bytes", c.TurnsAnswerBytes, "length of the fake model's answers in the memory suite's turns (0: \"ok\")")
	fs.IntVar(&p.MemoryConcurrency, "memory-concurrency", c.MemoryConcurrency, "sessions talking at once in the memory suite")
	fs.DurationVar(&p.MemoryWindow, "memory-window", c.MemoryWindow, "duplicate windows of the memory suite's fleet")
	fs.DurationVar(&p.MemorySettle, "memory-settle", c.MemorySettle, "idle time before each RSS reading of the memory suite (0: --memory-window + 70s, so the windows pass, block caches expire and the idle trim runs)")
	fs.DurationVar(&p.Settle, "settle", c.Settle, "idle time before an RSS is read")
	fs.BoolVar(&p.Baseline, "baseline", c.Baseline, "also run the all-in-one scenarios through the agent loop alone")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	return f, nil
}

// quickConfig shrinks every suite for a smoke run.
func quickConfig(c bench.Config) bench.Config {
	c.ZeroSessions = []int{1, 10}
	c.ZeroTurns = 400
	c.SlotSessions = []int{10, 100}
	c.SlotTurns = 2
	c.ShippedSessions = []int{10, 100}
	c.ShippedTurns = 2
	c.TTFTSessions = []int{1, 20}
	c.TTFTTurns = 2
	c.OneShotRuns = 2
	c.SlowLatency = 200 * time.Millisecond
	c.WorkerCounts = []int{1, 2}
	c.WorkerSessions = 32
	c.WorkerTurns = 2
	c.MemorySessions = []int{100, 500, 1000}
	c.TurnSessions, c.TurnsFirst, c.TurnsAll = 20, 200, 2000
	c.MemoryConcurrency = 20
	c.Settle = time.Second
	return c
}

// workspaceRoot is the directory of the go.work file the command runs in.
func workspaceRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOWORK").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOWORK: %w", err)
	}
	gowork := strings.TrimSpace(string(out))
	if gowork == "" || gowork == "off" {
		return "", errors.New("bench: run it inside the nanofleet go.work workspace (e.g. make bench)")
	}
	return filepath.Dir(gowork), nil
}

// intList registers a comma-separated list of positive integers.
func intList(fs *flag.FlagSet, p *[]int, name, usage string) {
	fs.Func(name, usage+" (comma separated, default "+joinInts(*p)+")", func(s string) error {
		var vs []int
		for f := range strings.SplitSeq(s, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return err
			}
			vs = append(vs, v)
		}
		*p = vs
		return nil
	})
}

func joinInts(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}
