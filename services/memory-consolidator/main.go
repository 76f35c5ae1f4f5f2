// Command memory-consolidator condenses old conversation turns into
// long-term memory, runs Dream on its schedule and keeps the workspace's
// memory files in sync with JetStream. Run as many as the load needs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/memtrim"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/memoryconsolidator"
)

func main() {
	var flags svc.Flags
	flags.Register(flag.CommandLine)
	id := flag.String("id", "", "consolidator id, unique among running ones (default host-pid)")
	workspace := flag.String("workspace", "", "workspace whose MEMORY.md, SOUL.md and USER.md are synced (empty: no sync)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, flags, *id, *workspace); err != nil {
		flags.Logger("memory-consolidator").Error("memory-consolidator failed", "err", err)
		fmt.Fprintln(os.Stderr, "memory-consolidator:", err)
		stop()
		os.Exit(1)
	}
}

// run runs the service until ctx ends.
func run(ctx context.Context, flags svc.Flags, id, workspace string) error {
	log := flags.Logger("memory-consolidator")
	file, err := flags.LoadConfig()
	if err != nil {
		return err
	}
	reg := observe.NewRegistry()
	// /readyz says why while NATS is not there yet.
	var ready svc.Readiness
	stopHTTP, err := svc.Observability(ctx, flags.HTTP, reg, ready.Check)
	if err != nil {
		return err
	}
	defer stopHTTP()
	b, err := svc.Connect(ctx, file, "memory-consolidator", log, &ready, memory.Assets)
	if err != nil {
		return err
	}
	defer b.Close()
	var s *memoryconsolidator.Service
	err = svc.Retry(ctx, log, &ready, "start memory-consolidator", func(ctx context.Context) error {
		s, err = memoryconsolidator.New(ctx, file, memoryconsolidator.Deps{
			Bus: b, ID: id, Workspace: workspace, Metrics: observe.NewMetrics(reg),
		}, memoryconsolidator.WithLogger(log))
		return err
	})
	if err != nil {
		return err
	}
	// Give the memory of a burst back once the process goes quiet.
	go memtrim.Run(ctx, memtrim.DefaultConfig())
	ready.Ready(svc.BusReady(b))
	log.Info("memory-consolidator running")
	return s.Run(ctx)
}
