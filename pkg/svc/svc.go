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
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

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
// the process environment, and applies the flags over it.
func (f *Flags) LoadConfig() (*config.File, error) {
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
		if file.NATS.URL, err = localFleet(os.Getenv); err != nil {
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
func localFleet(getenv func(string) string) (string, error) {
	dir := getenv("NANOFLEET_DATA")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", nil
		}
		dir = filepath.Join(home, ".nanofleet", "data")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
	l.LeaseTTL = time.Duration(file.NATS.LeaseTTLSeconds) * time.Second
	l.DuplicateWindow = time.Duration(file.NATS.DuplicateWindowSeconds) * time.Second
	l.ReplayWindow = time.Duration(file.NATS.ReplayWindowSeconds) * time.Second
	return l
}

// Connect connects to the fleet's NATS, retrying for up to a minute (in
// compose and Kubernetes, NATS may start after us), and provisions the
// layout.
func Connect(ctx context.Context, file *config.File, name string, log *slog.Logger) (*bus.Bus, error) {
	var (
		b   *bus.Bus
		err error
	)
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cfg := BusConfig(file, name)
		cfg.Log = log
		b, err = bus.Connect(cctx, cfg)
		cancel()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		log.Warn("nats not reachable yet; retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	if err != nil {
		return nil, err
	}
	// A cluster electing stream leaders (a node just restarted) can time
	// provisioning out; retry for a while before giving up.
	for {
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err = bus.Provision(pctx, b, Layout(file))
		cancel()
		if err == nil {
			return b, nil
		}
		transient := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders)
		if !transient || time.Now().After(deadline.Add(time.Minute)) || ctx.Err() != nil {
			b.Close()
			return nil, err
		}
		log.Warn("provisioning failed; retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// Observability starts the /metrics, /healthz and /readyz server on addr
// (nothing when addr is empty); ready reports readiness.
func Observability(ctx context.Context, addr string, reg *prometheus.Registry, ready func(context.Context) error) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	srv := observe.NewServer(addr, reg, ready)
	if err := srv.Start(ctx); err != nil {
		return nil, fmt.Errorf("observability server: %w", err)
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
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
