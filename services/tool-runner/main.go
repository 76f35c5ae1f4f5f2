// Command tool-runner serves the fleet's file, exec, web and MCP tools over
// NATS, confined to workspaces; see package runner. Run as many as the load
// needs: calls are load-balanced over a queue group.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/memtrim"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
)

func main() {
	var flags svc.Flags
	flags.Register(flag.CommandLine)
	workspace := flag.String("workspace", "", "workspace root (overrides tools.workspace.root)")
	flag.Parse()
	if err := run(flags, *workspace); err != nil {
		flags.Logger("tool-runner").Error("tool-runner failed", "err", err)
		fmt.Fprintln(os.Stderr, "tool-runner:", err)
		os.Exit(1)
	}
}

func run(flags svc.Flags, workspace string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := flags.Logger("tool-runner")
	file, err := flags.LoadConfig()
	if err != nil {
		return err
	}
	cfg, err := runner.FromFile(file, workspace)
	if err != nil {
		return err
	}
	b, err := svc.Connect(ctx, file, "tool-runner", log)
	if err != nil {
		return err
	}
	defer b.Close()
	// The runners hold the workspace, so they seed the agent profile
	// (bootstrap files, skills) that workers read from JetStream.
	kv, err := b.KV(ctx, bus.BucketProfile)
	if err != nil {
		return err
	}
	seed := profile.SeedOptions{Editable: cfg.Workspace.EditableProfile, Log: log}
	if n, err := profile.Seed(ctx, kv, profile.DefaultAgent, cfg.Workspace.Root, seed); err != nil {
		log.Warn("seed agent profile from workspace", "err", err)
	} else if n > 0 {
		log.Info("agent profile seeded from workspace", "entries", n)
	}
	reg := observe.NewRegistry()
	r, err := runner.New(cfg, b, runner.WithLogger(log))
	if err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.Start(startCtx); err != nil {
		return err
	}
	// Give the memory of a burst back once the process goes quiet.
	go memtrim.Run(ctx, memtrim.DefaultConfig())
	stopHTTP, err := svc.Observability(ctx, flags.HTTP, reg, svc.BusReady(b))
	if err != nil {
		return err
	}
	defer stopHTTP()
	log.Info("tool-runner running", "workspace", cfg.Workspace.Root)
	<-ctx.Done()
	log.Info("signal received; draining")
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelStop()
	return r.Stop(stopCtx)
}
