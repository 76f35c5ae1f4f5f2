// Package svc is the start-up every nanofleet service binary shares: the
// common flags, loading and validating the config file, connecting to the
// fleet's NATS and provisioning its layout, and the observability server.
// It keeps each main.go to flags, construct and run.
package svc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/fleetdir"
	"github.com/nanofleet/nanofleet/pkg/observe"
)

// Flags are the flags every service takes.
type Flags struct {
	NATS     string
	Creds    string
	Prefix   string
	Config   string
	HTTP     string
	LogLevel string

	// fs is where the flags were registered, to tell a flag given from
	// its default.
	fs *flag.FlagSet
}

// Register adds the common flags to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.NATS, "nats", os.Getenv("NANOFLEET_NATS_URL"), "NATS server URL(s), comma separated (env NANOFLEET_NATS_URL)")
	fs.StringVar(&f.Creds, "creds", "", "NATS credentials file")
	fs.StringVar(&f.Prefix, "prefix", "", "subject prefix of the fleet (default from config, else nanofleet)")
	fs.StringVar(&f.Config, "config", os.Getenv("NANOFLEET_CONFIG"), "config file (nanobot-style JSON; env NANOFLEET_CONFIG)")
	fs.StringVar(&f.HTTP, "http", ":9090", "observability address (/metrics, /healthz, /readyz); empty disables (default: observability.listen, else :9090)")
	fs.StringVar(&f.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
}

// Logger returns a JSON logger at the flags' level.
func (f *Flags) Logger(service string) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.LogLevel)); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})).With("service", service)
}

// LoadConfig reads the config file (optional when no path was given) with
// the process environment, and applies the flags over it. ctx bounds the
// wait for an all-in-one on this machine that is still starting, when
// the config names no NATS server.
func (f *Flags) LoadConfig(ctx context.Context) (*config.File, error) {
	file, err := config.Load(f.Config, os.Getenv, f.Config == "")
	if err != nil {
		return nil, err
	}
	if f.Prefix != "" {
		file.NATS.Prefix = f.Prefix
	}
	if f.NATS != "" {
		file.NATS.URL = f.NATS
	}
	if f.Creds != "" {
		file.NATS.CredsFile = f.Creds
	}
	// The config says where the observability server listens unless
	// --http was given.
	if file.Observability.Listen != "" && !f.given("http") {
		f.HTTP = file.Observability.Listen
	}
	if file.NATS.URL == "" {
		// An all-in-one on this machine: join it with its credentials.
		if file.NATS.URL, err = localFleet(ctx, os.Getenv); err != nil {
			return nil, err
		}
	}
	return file, file.Validate()
}

// given reports whether the flag called name was on the command line.
func (f *Flags) given(name string) bool {
	found := false
	if f.fs != nil {
		f.fs.Visit(func(fl *flag.Flag) { found = found || fl.Name == name })
	}
	return found
}

// localFleet is the NATS URL, with credentials, of the all-in-one running
// on this machine's data directory (NANOFLEET_DATA, else
// ~/.nanofleet/data); empty when none runs there.
func localFleet(ctx context.Context, getenv func(string) string) (string, error) {
	dir := getenv("NANOFLEET_DATA")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", nil
		}
		dir = filepath.Join(home, ".nanofleet", "data")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := fleetdir.Find(ctx, dir)
	if errors.Is(err, fleetdir.ErrNotRunning) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("nats: no --nats given and %w", err)
	}
	return r.URL()
}

// BusConfig turns the config's nats section into a connection config.
func BusConfig(file *config.File, name string) bus.Config {
	n := file.NATS
	return bus.Config{
		URL: n.URL, CredsFile: n.CredsFile, Prefix: n.Prefix, Domain: n.Domain, Name: name,
		TLS: bus.TLSConfig{CertFile: n.TLS.CertFile, KeyFile: n.TLS.KeyFile, CAFile: n.TLS.CAFile},
	}
}

// Layout is the JetStream layout the config asks for.
func Layout(file *config.File) bus.Layout {
	l := bus.DefaultLayout()
	l.Replicas = file.NATS.Replicas
	l.LeaseTTL = config.SecondsDuration(file.NATS.LeaseTTLSeconds)
	l.DuplicateWindow = config.SecondsDuration(file.NATS.DuplicateWindowSeconds)
	l.ReplayWindow = config.SecondsDuration(file.NATS.ReplayWindowSeconds)
	l.BlobsMaxBytes = int64(file.NATS.BlobsMaxMB) << 20
	return l
}

// attemptTimeout bounds one attempt of a start-up step: a request lost
// with a server that died fails and is retried.
const attemptTimeout = 30 * time.Second

// Connect connects to the fleet's NATS and provisions the core layout and
// the assets of decls with the config's replicas. NATS may start after
// us (compose, Kubernetes) or be a cluster that has lost its quorum or is
// electing leaders, so transient failures are retried with backoff until
// ctx ends, each one logged and reported on ready (which may be nil);
// only a permanent one (a layout the server refuses) is returned.
func Connect(ctx context.Context, file *config.File, name string, log *slog.Logger, ready *Readiness, decls ...bus.Declare) (*bus.Bus, error) {
	layout := Layout(file)
	if err := layout.Validate(); err != nil {
		return nil, err
	}
	var b *bus.Bus
	err := Retry(ctx, log, ready, "connect to nats", func(ctx context.Context) error {
		var err error
		b, err = bus.Connect(ctx, BusConfig(file, name), bus.LogAsyncErrors(log))
		return err
	})
	if err != nil {
		return nil, err
	}
	err = Retry(ctx, log, ready, "provision the jetstream layout", func(ctx context.Context) error {
		return bus.Provision(ctx, b, layout, decls...)
	})
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Retry runs step until it succeeds, retrying transient bus failures
// ([bus.Transient]) with [backoff.Backoff] until ctx ends. Each attempt gets
// 30 s, so step must not tie anything that outlives it to its ctx.
// Meanwhile ready (which may be nil) reports not ready with the reason,
// and each failure is logged. A service wraps every start-up step that
// talks to the bus in it, so that a slow or restarting cluster delays it
// instead of killing it.
func Retry(ctx context.Context, log *slog.Logger, ready *Readiness, what string, step func(context.Context) error) error {
	err := bus.RetryEach(ctx, backoff.Backoff{}, attemptTimeout, step, func(err error, wait time.Duration) {
		err = fmt.Errorf("%s: %w", what, err)
		ready.NotReady(err)
		log.Warn("nats not ready; retrying", "step", what, "err", err, "retry_in", wait.Round(time.Millisecond))
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Readiness is what a service's /readyz reports: not ready, with the
// reason, while it starts (and waits for NATS); then its check. The zero
// value is not ready ("starting"). Safe for concurrent use; a nil
// *Readiness ignores every call.
type Readiness struct {
	mu     sync.Mutex
	reason error
	check  func(context.Context) error
}

// errStarting is the reason of a service that has not said otherwise.
var errStarting = errors.New("starting")

// NotReady reports err until [Readiness.Ready] is called.
func (r *Readiness) NotReady(err error) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reason, r.check = err, nil
}

// Ready makes check decide from now on.
func (r *Readiness) Ready(check func(context.Context) error) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reason, r.check = nil, check
}

// Check is the readiness check to serve.
func (r *Readiness) Check(ctx context.Context) error {
	r.mu.Lock()
	reason, check := r.reason, r.check
	r.mu.Unlock()
	switch {
	case check != nil:
		return check(ctx)
	case reason != nil:
		return reason
	}
	return errStarting
}

// Observability starts the /metrics, /healthz and /readyz server on addr
// (nothing when addr is empty) and returns once it listens; ready reports
// readiness. The server outlives ctx: once ctx ends it reports not ready
// while the service drains, and stop stops it (waiting up to
// [observe.ShutdownTimeout] for requests in flight).
func Observability(ctx context.Context, addr string, reg *prometheus.Registry, ready func(context.Context) error) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	if ready == nil {
		ready = func(context.Context) error { return nil }
	}
	srv := observe.NewServer(addr, reg, func(rctx context.Context) error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("draining: %w", err)
		}
		return ready(rctx)
	})
	// Started from ctx without its cancellation: the server reports the
	// drain once ctx ends, and stops only on stop.
	stopRun, err := Background(context.WithoutCancel(ctx), srv.Run, srv.Listening())
	if err != nil {
		// Both callers take addr from these two, as the web chat's
		// listener names channels.web.listen or --listen.
		return nil, fmt.Errorf("observability server (observability.listen or --http): %w", err)
	}
	return func() { _ = stopRun() }, nil
}

// BusReady is a readiness check: the NATS connection is up.
func BusReady(b *bus.Bus) func(context.Context) error {
	return func(context.Context) error {
		if !b.NC.IsConnected() {
			return fmt.Errorf("nats: %s", b.NC.Status())
		}
		return nil
	}
}
