package svc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/memtrim"
	"github.com/nanofleet/nanofleet/pkg/observe"
)

// Service is what a service binary runs.
type Service struct {
	// Name names the service in logs, its NATS connection and errors.
	Name string
	// Assets declares the JetStream assets it needs besides the core
	// layout.
	Assets []bus.Declare
	// Metrics registers the fleet's metrics for Start ([Env.Metrics]).
	Metrics bool
	// Start builds the service once NATS is connected and the layout
	// provisioned, and returns what runs it until ctx ends. It is retried
	// like every start-up step ([Retry]), so it must not tie anything that
	// outlives it to its ctx.
	Start func(ctx context.Context, env Env) (run func(context.Context) error, err error)
}

// Env is what [Run] gives a service's Start.
type Env struct {
	File     *config.File
	Bus      *bus.Bus
	Log      *slog.Logger
	Registry *prometheus.Registry
	// Metrics are registered on Registry; nil unless [Service.Metrics].
	Metrics *observe.Metrics
}

// Main runs s with flags until SIGINT or SIGTERM, and exits non-zero
// after logging why when it fails.
func Main(flags Flags, s Service) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, flags, s)
	stop()
	if err != nil {
		flags.Logger(s.Name).Error(s.Name+" failed", "err", err)
		fmt.Fprintln(os.Stderr, s.Name+":", err)
		os.Exit(1)
	}
}

// Run is a service's life until ctx ends: load and check the config, serve
// /metrics, /healthz and /readyz (not ready, saying why, until the
// service runs), connect to NATS and provision the layout, start the
// service, give the memory of a burst back once the process goes quiet,
// and run it. Stopped by ctx, it logs why and, once the running work has
// finished, that it stopped; a stop before the service ran is no error.
func Run(ctx context.Context, flags Flags, s Service) error {
	log := flags.Logger(s.Name)
	// An operator who stops a service sees why, and how long the running
	// work took to finish.
	var stopping time.Time
	logStopping := func() {
		stopping = time.Now()
		log.Info(s.Name+" stopping", "why", context.Cause(ctx).Error())
	}
	logged := make(chan struct{})
	stopLogging := context.AfterFunc(ctx, func() {
		defer close(logged)
		logStopping()
	})
	err := serve(ctx, flags, s, log)
	switch {
	case !stopLogging():
		<-logged
	case ctx.Err() == nil:
		return err
	default:
		// Stopped, but serve saw ctx end before the AfterFunc started: a
		// context closes Done before it starts its AfterFuncs.
		logStopping()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = nil // stopped while it was still starting: asked for, not a failure
	}
	log.Info(s.Name+" stopped", "after", time.Since(stopping).Round(time.Millisecond).String())
	return err
}

// serve is [Run] but for the stop's log lines.
func serve(ctx context.Context, flags Flags, s Service, log *slog.Logger) error {
	file, err := flags.LoadConfig(ctx)
	if err != nil {
		return err
	}
	reg := observe.NewRegistry()
	var ready Readiness
	stopHTTP, err := Observability(ctx, flags.HTTP, reg, ready.Check)
	if err != nil {
		return err
	}
	defer stopHTTP()
	b, err := Connect(ctx, file, s.Name, log, &ready, s.Assets...)
	if err != nil {
		return err
	}
	defer b.Close()
	env := Env{File: file, Bus: b, Log: log, Registry: reg}
	if s.Metrics {
		env.Metrics = observe.NewMetrics(reg)
	}
	var run func(context.Context) error
	err = Retry(ctx, log, &ready, "start "+s.Name, func(ctx context.Context) error {
		var err error
		run, err = s.Start(ctx, env)
		return err
	})
	if err != nil {
		return err
	}
	go memtrim.Run(ctx, memtrim.DefaultConfig())
	ready.Ready(BusReady(b))
	log.Info(s.Name + " running")
	return run(ctx)
}
