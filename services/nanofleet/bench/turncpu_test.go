package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// TestTurnCPU explains what a turn of the shipped suite costs in CPU: it
// runs that suite's load (200 sessions of ShippedTurns turns, the model at
// SlowLatency) against the all-in-one in this process, gateway included
// as `nanofleet run` has it, NANOFLEET_BENCH_CPU_RUNS times (default 6)
// on a new fleet each, and writes a CPU profile of each load (warm-up and
// start-up left out) into NANOFLEET_BENCH_CPU (a directory), so that
//
//	go tool pprof -top -cum DIR/cpu-*.prof
//
// shows where the turns' CPU goes, and an execution trace of each load
// (trace-*.out) whose scheduling-delay profile
//
//	go tool trace -pprof=sched DIR/trace-0.out > sched.prof
//	go tool pprof -top -cum sched.prof
//
// shows how long goroutines waited, runnable, for a core, and where they
// had been woken. The process also holds the fake model
// (pkg/llm/llmtest frames) and the load generator (fleet.Client), which
// the suite runs in another process. It logs the process's CPU per turn,
// which other processes' load inflates, and the messages the embedded
// server received and sent per turn, which they do not. It runs only when
// NANOFLEET_BENCH_CPU is set.
func TestTurnCPU(t *testing.T) {
	dir := os.Getenv("NANOFLEET_BENCH_CPU")
	if dir == "" {
		t.Skip("set NANOFLEET_BENCH_CPU=DIR to write CPU profiles")
	}
	runs := 6
	if v := os.Getenv("NANOFLEET_BENCH_CPU_RUNS"); v != "" {
		var err error
		if runs, err = strconv.Atoi(v); err != nil {
			t.Fatalf("NANOFLEET_BENCH_CPU_RUNS: %v", err)
		}
	}
	c := DefaultConfig()
	const sessions = 200
	var cpu time.Duration
	turns := 0
	for i := range runs {
		d, n := turnCPURun(t, dir, i, load{
			Concurrency: sessions, Chats: sessions, TurnsPerChat: c.ShippedTurns, Prefix: fmt.Sprint("cpu", i),
		}, c.SlowLatency)
		cpu += d
		turns += n
	}
	t.Logf("all runs: %.3f ms of process CPU per turn over %d turns", ms(cpu)/float64(turns), turns)
}

// turnCPURun starts a fleet, warms it up, and runs l under a CPU profile
// and an execution trace, written to dir as cpu-i.prof and trace-i.out. It
// returns the process's CPU time over the load and the turns it ran.
func turnCPURun(t *testing.T, dir string, i int, l load, latency time.Duration) (time.Duration, int) {
	model, err := startModel(latency, false)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	tmp := t.TempDir()
	ws, err := prepareWorkspace(tmp)
	if err != nil {
		t.Fatal(err)
	}
	// No worker settings: the defaults, as the shipped suite runs.
	_, file, err := fleetSettings{modelURL: model.URL()}.write(tmp)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	f, c, stop := startFleet(t, fleet.Options{
		File: file, Getenv: noEnv, DataDir: filepath.Join(tmp, "data"), Workspace: ws,
		Workers: 1, Gateway: true, GatewayListen: "127.0.0.1:0",
	})
	defer stop()
	turn := fleetTurn(c)
	if err := warmUp(ctx, turn, scenario{workers: 1, slots: l.Concurrency, load: l}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("cpu-%d.prof", i))
	pf, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	tf, err := os.Create(filepath.Join(dir, fmt.Sprintf("trace-%d.out", i)))
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	srv := f.Embedded.NATSServer()
	v0, err := srv.Varz(nil)
	if err != nil {
		t.Fatal(err)
	}
	cpu0, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		t.Fatal(err)
	}
	if err := trace.Start(tf); err != nil {
		t.Fatal(err)
	}
	s := l.run(ctx, turn)
	trace.Stop()
	pprof.StopCPUProfile()
	cpu1, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	v1, err := srv.Varz(nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Errors > 0 {
		t.Fatalf("%d turns failed: %v", s.Errors, s.FirstErr)
	}
	n := len(s.Latencies)
	per := func(a, b int64) float64 { return float64(b-a) / float64(n) }
	t.Logf("%s: %d turns in %s (%.0f/s), process CPU %.3f ms per turn; the server received %.2f messages (%.0f bytes) and sent %.2f (%.0f bytes) per turn",
		filepath.Base(path), n, s.Elapsed.Round(time.Millisecond), float64(n)/s.Elapsed.Seconds(), ms(cpu1-cpu0)/float64(n),
		per(v0.InMsgs, v1.InMsgs), per(v0.InBytes, v1.InBytes), per(v0.OutMsgs, v1.OutMsgs), per(v0.OutBytes, v1.OutBytes))
	return cpu1 - cpu0, n
}
