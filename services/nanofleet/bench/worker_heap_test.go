package bench

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/memtrim"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/pkg/toolclient"
	"github.com/nanofleet/nanofleet/services/agent-worker/service"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

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
	dir := os.Getenv("NANOFLEET_BENCH_WORKER_HEAP")
	if dir == "" {
		t.Skip("set NANOFLEET_BENCH_WORKER_HEAP=DIR to write heap profiles")
	}
	const sessions, first = 100, 1000
	all := 100_000
	if s := os.Getenv("NANOFLEET_BENCH_WORKER_TURNS"); s != "" {
		var err error
		if all, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	tmp := t.TempDir()
	root, err := filepath.Abs("../../..") // the go.work workspace
	if err != nil {
		t.Fatal(err)
	}
	bins, err := buildBinaries(ctx, root, tmp, "nats-server", "tool-runner")
	if err != nil {
		t.Fatal(err)
	}
	model, err := startModel(0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	ws, err := prepareWorkspace(tmp)
	if err != nil {
		t.Fatal(err)
	}
	window := DefaultConfig().MemoryWindow
	cfgPath, file, err := fleetSettings{modelURL: model.URL(), windows: window}.write(tmp)
	if err != nil {
		t.Fatal(err)
	}
	nats, url, err := startNATS(ctx, bins, filepath.Join(tmp, "nats"))
	if err != nil {
		t.Fatal(err)
	}
	defer nats.kill()
	runner, err := startProc("tool-runner", bins.path("tool-runner"), nil,
		"--nats", url, "--config", cfgPath, "--http", "", "--log-level", "info", "--workspace", ws)
	if err != nil {
		t.Fatal(err)
	}
	defer runner.kill()
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
	if err := bus.Provision(ctx, wb, svc.Layout(file), service.Assets); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	tools, err := toolclient.New(wb, toolclient.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	w, err := service.New(ctx, wb, service.Options{File: file, Getenv: noEnv, ID: "heap", Workspace: ws, Tools: tools, Log: log})
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
		sleep(ctx, settleAfterLoad(window))
		writeHeap(t, dir, []string{"turns-first", "turns-all"}[i])
	}
	select {
	case err := <-done:
		t.Fatalf("worker stopped: %v", err)
	default:
	}
}
