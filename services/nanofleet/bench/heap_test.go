package bench

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/memtrim"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/pkg/toolclient"
	"github.com/nanofleet/nanofleet/services/agent-worker/agentworker"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// TestHeapGrowth explains what extra sessions cost (the memory suite's
// KB per idle session): it drives the all-in-one in this process with
// 1,000 turns over 100 sessions, then NANOFLEET_BENCH_HEAP_SESSIONS more
// sessions of 10 turns, and writes a heap profile after each phase into
// NANOFLEET_BENCH_HEAP (a directory), so that
//
//	go tool pprof -top -base DIR/heap-first.prof DIR/heap-last.prof
//
// shows which code holds the memory the extra sessions added. Like the
// memory suite it shortens the duplicate windows and waits for them, the
// server's caches and the idle trim before each profile. It runs only when
// NANOFLEET_BENCH_HEAP is set.
func TestHeapGrowth(t *testing.T) {
	dir, sessions := heapSettings(t, "NANOFLEET_BENCH_HEAP", "NANOFLEET_BENCH_HEAP_SESSIONS", 3000)
	window := DefaultConfig().MemoryWindow
	h := newHeapFleet(t, fleetSettings{slots: 16, limit: 4096, windows: window}, 0)
	ctx := t.Context()
	_, c, stop := startFleet(t, fleet.Options{
		File: h.file, Getenv: noEnv, DataDir: filepath.Join(h.tmp, "data"), Workspace: h.ws, Workers: 1,
	})
	defer stop()
	// As `nanofleet run` does, and as long as the growth suite waits.
	go memtrim.Run(ctx, memtrim.DefaultConfig())
	profile := func(name string) {
		_ = backoff.Sleep(ctx, settleAfterLoad(window))
		writeHeap(t, dir, name)
	}
	for i, l := range []load{
		{Concurrency: 100, Chats: 100, TurnsPerChat: 10, Prefix: "first"},
		{Concurrency: 100, Chats: sessions, TurnsPerChat: 10, Prefix: "last"},
	} {
		if s := l.run(ctx, fleetTurn(c)); s.Errors > 0 {
			t.Fatalf("%d turns failed: %v", s.Errors, s.FirstErr)
		}
		profile([]string{"first", "last"}[i])
	}
}

// TestAllInOneTurnsHeap explains the all-in-one's RSS growth with turns
// (the memory suite's turns phase, in this process): it drives 1,000
// turns over 100 sessions with the suite's settings (an 8,192-token
// window, answers of 2,000 bytes, consolidations), then on to 10,000,
// 30,000 and NANOFLEET_BENCH_AIO_TURNS in all (default 100,000) over the
// same sessions, and after each step's settle writes a heap profile and
// the runtime's memory classes into NANOFLEET_BENCH_AIO_HEAP (a
// directory): live data that grows shows in
//
//	go tool pprof -top -base DIR/heap-aio-1000.prof DIR/heap-aio-100000.prof
//
// and heap the runtime holds around it ("unused", span and other metadata)
// only in the classes. The load generator and the fake model share the
// process. It runs only when NANOFLEET_BENCH_AIO_HEAP is set.
func TestAllInOneTurnsHeap(t *testing.T) {
	dir, all := heapSettings(t, "NANOFLEET_BENCH_AIO_HEAP", "NANOFLEET_BENCH_AIO_TURNS", 100_000)
	const sessions = 100
	c := DefaultConfig()
	h := newHeapFleet(t, fleetSettings{windows: c.MemoryWindow, contextWindow: c.TurnsContextWindow}, c.TurnsAnswerBytes)
	ctx := t.Context()
	_, client, stop := startFleet(t, fleet.Options{
		File: h.file, Getenv: noEnv, DataDir: filepath.Join(h.tmp, "data"), Workspace: h.ws, Workers: 1,
	})
	defer stop()
	go memtrim.Run(ctx, memtrim.DefaultConfig())
	done := 0
	for _, n := range []int{1000, 10_000, 30_000, all} {
		if n <= done || n > all {
			continue
		}
		l := load{Concurrency: sessions, Chats: sessions, TurnsPerChat: (n - done) / sessions, Prefix: "t"}
		s := l.run(ctx, fleetTurn(client))
		if s.Errors > 0 {
			t.Fatalf("%d turns failed: %v", s.Errors, s.FirstErr)
		}
		done = n
		t.Logf("%d turns (%d in all) in %s", len(s.Latencies), n, s.Elapsed.Round(time.Second))
		_ = backoff.Sleep(ctx, settleAfterLoad(c.MemoryWindow))
		writeHeap(t, dir, "aio-"+strconv.Itoa(n))
	}
}

// TestWorkerTurnsHeap explains the agent-worker's RSS growth with turns
// (the memory suite's "RSS after TurnsAll turns over TurnSessions
// sessions"): it runs the agent-worker in this process, as its main does,
// against a nats-server and a tool-runner process, drives 1,000 turns over
// 100 sessions, then NANOFLEET_BENCH_WORKER_TURNS in all (default
// 100,000), and writes a heap profile after each into
// NANOFLEET_BENCH_WORKER_HEAP (a directory), so that
//
//	go tool pprof -top -base DIR/heap-turns-first.prof DIR/heap-turns-all.prof
//
// shows whether live data grows with turns, and which code holds it. The
// load generator and the fake model share the process; their allocations
// are on their own stacks. It runs only when NANOFLEET_BENCH_WORKER_HEAP
// is set.
func TestWorkerTurnsHeap(t *testing.T) {
	dir, all := heapSettings(t, "NANOFLEET_BENCH_WORKER_HEAP", "NANOFLEET_BENCH_WORKER_TURNS", 100_000)
	const sessions, first = 100, 1000
	window := DefaultConfig().MemoryWindow
	h := newHeapFleet(t, fleetSettings{windows: window}, 0)
	cfgPath, file, ws := h.cfgPath, h.file, h.ws
	ctx := t.Context()
	root, err := filepath.Abs("../../..") // the go.work workspace
	if err != nil {
		t.Fatal(err)
	}
	bins, err := buildBinaries(ctx, root, h.tmp, "nats-server", "tool-runner")
	if err != nil {
		t.Fatal(err)
	}
	nats, url, err := startNATS(ctx, bins, filepath.Join(h.tmp, "nats"))
	if err != nil {
		t.Fatal(err)
	}
	defer nats.Kill()
	runner, err := startProc("tool-runner", bins.path("tool-runner"), nil,
		"--nats", url, "--config", cfgPath, "--http", "", "--log-level", "info", "--workspace", ws)
	if err != nil {
		t.Fatal(err)
	}
	defer runner.Kill()
	if err := runner.waitOutput(ctx, "tool-runner running", time.Minute); err != nil {
		t.Fatal(err)
	}

	// The agent-worker, as services/agent-worker/main.go assembles it, on
	// a connection of its own.
	wb, err := bus.Connect(ctx, bus.Config{URL: url, Name: "agent-worker"})
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Close()
	if err := bus.Provision(ctx, wb, svc.Layout(file), agentworker.Assets); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	tools, err := toolclient.New(wb, toolclient.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	w, err := agentworker.New(ctx, file, agentworker.Deps{Bus: wb, Getenv: noEnv, ID: "heap", Workspace: ws, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	go memtrim.Run(ctx, memtrim.DefaultConfig())

	b, err := dial(ctx, url, file)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := fleet.NewClient(ctx, b, "bench")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, l := range []load{
		{Concurrency: sessions, Chats: sessions, TurnsPerChat: first / sessions, Prefix: "t"},
		{Concurrency: sessions, Chats: sessions, TurnsPerChat: (all - first) / sessions, Prefix: "t"},
	} {
		s := l.run(ctx, fleetTurn(c))
		if s.Errors > 0 {
			t.Fatalf("%d turns failed: %v", s.Errors, s.FirstErr)
		}
		t.Logf("%d turns in %s", len(s.Latencies), s.Elapsed.Round(time.Second))
		_ = backoff.Sleep(ctx, settleAfterLoad(window))
		writeHeap(t, dir, []string{"turns-first", "turns-all"}[i])
	}
	select {
	case err := <-done:
		t.Fatalf("worker stopped: %v", err)
	default:
	}
}

// heapSettings reads an investigation test's settings: the directory its
// profiles go to from dirVar (the test is skipped without it) and a count
// from countVar (def when unset).
func heapSettings(t *testing.T, dirVar, countVar string, def int) (string, int) {
	t.Helper()
	dir := os.Getenv(dirVar)
	if dir == "" {
		t.Skipf("set %s=DIR to write heap profiles", dirVar)
	}
	// The default rate samples one allocation per 512 KB, too coarse for
	// a live heap of a few MB.
	runtime.MemProfileRate = 4096
	n := def
	if s := os.Getenv(countVar); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("%s: %v", countVar, err)
		}
	}
	return dir, n
}

// heapFleet is what an investigation test's fleet runs in: a temporary
// directory with the workspace and the config, and the 0 ms model.
type heapFleet struct {
	tmp, cfgPath, ws string
	file             *config.File
}

// newHeapFleet starts the 0 ms model and writes the workspace and the
// fleet's config (s with the model's URL) into a temporary directory. The
// model answers "ok", or answerBytes of text and consolidations with a
// save_memory call as the memory suite's turns phase has it.
func newHeapFleet(t *testing.T, s fleetSettings, answerBytes int) heapFleet {
	t.Helper()
	model, err := startModel(0, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(model.Close)
	if answerBytes > 0 {
		model.Handle(conversationModel(answerBytes))
	}
	h := heapFleet{tmp: t.TempDir()}
	if h.ws, err = prepareWorkspace(h.tmp); err != nil {
		t.Fatal(err)
	}
	s.modelURL = model.URL()
	if h.cfgPath, h.file, err = s.write(h.tmp); err != nil {
		t.Fatal(err)
	}
	return h
}

// startFleet starts the all-in-one in this process with opts, logging
// nothing, and a client of it as the load generator; stop closes the
// client and stops the fleet.
func startFleet(t *testing.T, opts fleet.Options) (_ *fleet.Fleet, _ *fleet.Client, stop func()) {
	t.Helper()
	f, err := fleet.Start(t.Context(), opts, fleet.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := fleet.NewClient(t.Context(), f.Bus, "bench")
	if err != nil {
		f.Stop()
		t.Fatal(err)
	}
	return f, c, func() {
		c.Close()
		f.Stop()
	}
}

// writeHeap reads the process's RSS, then collects garbage and writes
// DIR/heap-NAME.prof, logging the runtime's memory classes and the live
// heap: live data that grows shows in the profile, heap the collector has
// not given back only in the classes.
func writeHeap(t *testing.T, dir, name string) {
	t.Helper()
	before := rss()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	path := filepath.Join(dir, "heap-"+name+".prof")
	pf, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if err := pprof.WriteHeapProfile(pf); err != nil {
		t.Fatal(err)
	}
	for _, d := range metrics.All() {
		if strings.HasPrefix(d.Name, "/memory/classes/") {
			smp := []metrics.Sample{{Name: d.Name}}
			metrics.Read(smp)
			t.Logf("  %-50s %8.1f MB", d.Name, float64(smp[0].Value.Uint64())/(1<<20))
		}
	}
	t.Logf("%s: live heap %.1f MB (%d objects), %d goroutines, process RSS %s before the collection, %s after; profile %s", name,
		float64(ms.HeapAlloc)/(1<<20), ms.HeapObjects, runtime.NumGoroutine(), before, rss(), path)
}

func rss() string {
	kb, err := memKB(os.Getpid(), "VmRSS")
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%.1f MB", mb(kb))
}
