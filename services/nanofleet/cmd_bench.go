package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/services/nanofleet/bench"
)

// benchCmd drives the real fleet with a fake model and writes the figures
// (Markdown, JSON, SVG) to --out.
func benchCmd(ctx context.Context, env *environment, args []string) error {
	f, err := parseBenchFlags(env, args, bench.DefaultConfig())
	if err != nil {
		return err
	}
	if f.quick { // again over the small sizes, so that explicit flags still win
		if f, err = parseBenchFlags(env, args, quickConfig(bench.DefaultConfig())); err != nil {
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
	command := "cd services/nanofleet && go run . bench"
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
	fmt.Fprintf(env.stderr, "nanofleet bench: suites %s; results in %s\n", strings.Join(c.Suites, ","), *out)
	rep, runErr := bench.Run(ctx, c, bench.Options{
		Progress: env.stderr, BinDir: *binDir, Command: command,
		FleetLog: slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: lvl})),
	})
	if rep != nil && (runErr == nil || len(rep.Scenarios) > 0) {
		if err := bench.Write(*out, rep); err != nil {
			return errors.Join(runErr, err)
		}
		fmt.Fprintf(env.stderr, "nanofleet bench: wrote %s (%.0f s)\n", *out, rep.DurationS)
		if len(rep.Failures) > 0 {
			return errors.Join(runErr, fmt.Errorf("%d scenario(s) failed: %s", len(rep.Failures), strings.Join(rep.Failures, "; ")))
		}
	}
	return runErr
}

// benchFlags are the parsed flags of `nanofleet bench`.
type benchFlags struct {
	cfg                           bench.Config
	out, suites, binDir, logLevel string
	cpuProfile                    string
	quick, render                 bool
}

func parseBenchFlags(env *environment, args []string, c bench.Config) (*benchFlags, error) {
	f := &benchFlags{cfg: c}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
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
	fs.IntVar(&p.GrowthFirst, "growth-first", c.GrowthFirst, "turns after which the first RSS is read")
	fs.IntVar(&p.GrowthTurns, "growth-turns", c.GrowthTurns, "turns after which the second RSS is read")
	fs.IntVar(&p.GrowthSessions, "growth-sessions", c.GrowthSessions, "sessions the growth turns are spread over")
	fs.IntVar(&p.GrowthConcurrency, "growth-concurrency", c.GrowthConcurrency, "sessions talking at once in the growth suite")
	fs.DurationVar(&p.GrowthWindow, "growth-window", c.GrowthWindow, "duplicate windows of the growth suite's fleet; RSS is read once they have passed")
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
	c.GrowthFirst, c.GrowthTurns, c.GrowthSessions = 200, 1000, 100
	c.GrowthConcurrency = 20
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
