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

	"github.com/nanofleet/nanofleet/pkg/memtrim"
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
	dir := os.Getenv("NANOFLEET_BENCH_HEAP")
	if dir == "" {
		t.Skip("set NANOFLEET_BENCH_HEAP=DIR to write heap profiles")
	}
	sessions := 3000
	if s := os.Getenv("NANOFLEET_BENCH_HEAP_SESSIONS"); s != "" {
		var err error
		if sessions, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	tmp := t.TempDir()
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
	_, file, err := fleetSettings{modelURL: model.URL(), slots: 16, limit: 4096, windows: window}.write(tmp)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fleet.Start(ctx, fleet.Options{
		File: file, Getenv: noEnv, Log: slog.New(slog.DiscardHandler), DataDir: filepath.Join(tmp, "data"), Workspace: ws, Workers: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	c, err := fleet.NewClient(ctx, f.Bus, "bench")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// As `nanofleet run` does, and as long as the growth suite waits.
	go memtrim.Run(ctx, memtrim.DefaultConfig())
	profile := func(name string) {
		sleep(ctx, settleAfterLoad(window))
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
