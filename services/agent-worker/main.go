// Command agent-worker runs agent workers: it takes inbound messages from
// JetStream and turns each into one committed turn. Run as many as the load
// needs; they share the work and survive each other's crashes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nanofleet/nanofleet/pkg/memtrim"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/pkg/toolclient"
	"github.com/nanofleet/nanofleet/services/agent-worker/agentworker"
)

func main() {
	var flags svc.Flags
	flags.Register(flag.CommandLine)
	id := flag.String("id", "", "worker id, unique among running workers (default host-pid)")
	workspace := flag.String("workspace", "/workspace", "workspace path as the tool runners see it")
	flag.Parse()
	log := flags.Logger("agent-worker")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, flags, *id, *workspace); err != nil {
		log.Error("agent-worker failed", "err", err)
		fmt.Fprintln(os.Stderr, "agent-worker:", err)
		stop()
		os.Exit(1)
	}
}

// run runs the worker until ctx ends.
func run(ctx context.Context, flags svc.Flags, id, workspace string) error {
	log := flags.Logger("agent-worker")
	file, err := flags.LoadConfig()
	if err != nil {
		return err
	}
	reg := observe.NewRegistry()
	metrics := observe.NewMetrics(reg)
	// /readyz says why while NATS is not there yet.
	var ready svc.Readiness
	stopHTTP, err := svc.Observability(ctx, flags.HTTP, reg, ready.Check)
	if err != nil {
		return err
	}
	defer stopHTTP()
	b, err := svc.Connect(ctx, file, "agent-worker", log, &ready, agentworker.Assets)
	if err != nil {
		return err
	}
	defer b.Close()
	tools, err := toolclient.New(b, toolclient.WithLogger(log))
	if err != nil {
		return err
	}
	var w *agentworker.Worker
	err = svc.Retry(ctx, log, &ready, "start agent-worker", func(ctx context.Context) error {
		w, err = agentworker.New(ctx, file, agentworker.Deps{
			Bus: b, ID: id, Workspace: workspace, Tools: tools, Metrics: metrics,
		}, agentworker.WithLogger(log))
		return err
	})
	if err != nil {
		return err
	}
	defer w.Close()
	// Give the memory of a burst back once the process goes quiet.
	go memtrim.Run(ctx, memtrim.DefaultConfig())
	ready.Ready(svc.BusReady(b))
	log.Info("agent-worker running")
	return w.Run(ctx)
}
