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
	"github.com/nanofleet/nanofleet/services/memory-consolidator/service"
)

func main() {
	var flags svc.Flags
	flags.Register(flag.CommandLine)
	id := flag.String("id", "", "consolidator id, unique among running ones (default host-pid)")
	workspace := flag.String("workspace", "", "workspace whose MEMORY.md, SOUL.md and USER.md are synced (empty: no sync)")
	flag.Parse()
	if err := run(flags, *id, *workspace); err != nil {
		flags.Logger("memory-consolidator").Error("memory-consolidator failed", "err", err)
		fmt.Fprintln(os.Stderr, "memory-consolidator:", err)
		os.Exit(1)
	}
}

func run(flags svc.Flags, id, workspace string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := flags.Logger("memory-consolidator")
	file, err := flags.LoadConfig()
	if err != nil {
		return err
	}
	b, err := svc.Connect(ctx, file, "memory-consolidator", log)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := memory.Provision(ctx, b, svc.Layout(file)); err != nil {
		return err
	}
	reg := observe.NewRegistry()
	s, err := service.New(ctx, b, service.Options{
		File: file, ID: id, Workspace: workspace, Metrics: observe.NewMetrics(reg), Log: log,
	})
	if err != nil {
		return err
	}
	// Give the memory of a burst back once the process goes quiet.
	go memtrim.Run(ctx, memtrim.DefaultConfig())
	stopHTTP, err := svc.Observability(ctx, flags.HTTP, reg, svc.BusReady(b))
	if err != nil {
		return err
	}
	defer stopHTTP()
	log.Info("memory-consolidator running")
	return s.Run(ctx)
}
