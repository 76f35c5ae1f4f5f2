// Command tool-runner serves the fleet's file, exec and web tools over
// NATS, confined to workspaces; see package runner.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tool-runner:", err)
		os.Exit(1)
	}
}

func run() error {
	natsURL := flag.String("nats", nats.DefaultURL, "NATS server URL(s), comma separated")
	prefix := flag.String("prefix", subject.DefaultPrefix, "subject prefix of the fleet")
	workspace := flag.String("workspace", "", "workspace root (overrides tools.workspace.root)")
	configPath := flag.String("config", "", "JSON config file; its \"tools\" section is read")
	debug := flag.Bool("debug", false, "log every call")
	flag.Parse()

	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg := runner.DefaultConfig()
	if *configPath != "" {
		var err error
		if cfg, err = runner.LoadConfig(*configPath); err != nil {
			return err
		}
	}
	if *workspace != "" {
		cfg.Workspace.Root = *workspace
	}
	if err := cfg.Validate(); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := bus.Connect(ctx, bus.Config{URL: *natsURL, Prefix: *prefix, Name: "tool-runner"})
	if err != nil {
		return err
	}
	defer b.Close()
	if err := bus.Provision(ctx, b, bus.DefaultLayout()); err != nil {
		return err
	}
	r, err := runner.New(cfg, b, runner.WithLogger(log))
	if err != nil {
		return err
	}
	if err := r.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	log.Info("signal received; draining")
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.Stop(stopCtx)
}
