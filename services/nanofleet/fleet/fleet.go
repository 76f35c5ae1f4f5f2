// Package fleet runs the whole nanofleet in one process: an embedded
// nats-server (or a connection to an external one), the tool runner, the
// agent workers, the memory-consolidator and the channel-gateway. It is
// the all-in-one binary's engine, and the fleet that end-to-end tests and
// benchmarks drive. The services' code is the same as in their own
// binaries; only the wiring differs.
//
// Start brings the parts up in dependency order (NATS, runner, workers,
// consolidator, gateway); Stop takes them down in reverse, letting running
// turns finish first.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/embeddednats"
	"github.com/nanofleet/nanofleet/pkg/fleetdir"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/storeguard"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/services/agent-worker/agentworker"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/memoryconsolidator"
)

// Options are what the config file does not say.
type Options struct {
	File   *config.File
	Getenv func(string) string
	// DataDir holds the embedded server's JetStream store.
	DataDir string
	// Workspace is the agent's workspace directory.
	Workspace string
	// Listen makes the embedded server accept other processes on the
	// config's nats host and port; otherwise it is in-process only.
	Listen bool
	// Credentials are required of every client of the embedded server;
	// required with Listen.
	Credentials fleetdir.Credentials
	// Workers is how many agent workers run in the process (default 1).
	Workers int
	// Gateway runs the channel-gateway with the configured channels.
	Gateway bool
	// GatewayListen overrides channels.web.listen, the gateway's HTTP
	// address (web chat, dashboard, API, webhooks); without either it is
	// 127.0.0.1:8080.
	GatewayListen string
	// Announce receives lines a person needs to see (login links).
	Announce func(line string)
	// Registry receives the fleet's metrics; nil makes a new one.
	Registry *prometheus.Registry
	// ClientOnly connects to the external NATS of the config and runs no
	// part of the fleet there: the fleet at that NATS does the work.
	ClientOnly bool
	// StoreMinFree is the free space on the embedded server's store below
	// which the fleet refuses new messages as storage full (default
	// 32 MiB, at most a quarter of its filesystem); see package storeguard.
	StoreMinFree int64
}

// Fleet is a running in-process fleet.
type Fleet struct {
	Bus      *bus.Bus
	Embedded *embeddednats.Server
	// Storage watches the embedded server's store; nil with an external
	// server.
	Storage  *storeguard.Guard
	Metrics  *observe.Metrics
	Registry *prometheus.Registry

	log     *slog.Logger
	done    chan struct{}
	workers []*agentworker.Worker
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error
	closer  []func()
}

// Option adjusts how Start runs the fleet.
type Option func(*Fleet)

// WithLogger sets the logger the fleet passes to every part; without it, or
// with nil, the fleet logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(f *Fleet) { f.log = observe.OrDiscard(l) }
}

// Start brings the fleet up. It returns once every part is serving.
func Start(ctx context.Context, o Options, opts ...Option) (*Fleet, error) {
	if o.File == nil {
		return nil, errors.New("fleet: no config")
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Workers <= 0 {
		o.Workers = 1
	}
	ctx, cancelSetup := context.WithTimeout(ctx, time.Minute)
	defer cancelSetup()
	reg := o.Registry
	if reg == nil {
		reg = observe.NewRegistry()
	}
	f := &Fleet{log: observe.OrDiscard(nil), Registry: reg, Metrics: observe.NewMetrics(reg), done: make(chan struct{})}
	for _, opt := range opts {
		opt(f)
	}
	ok := false
	defer func() {
		if !ok {
			// The parts already running stop before their connection
			// closes, so that they do not fail (and say so) on it.
			f.Stop()
		}
	}()
	if !o.ClientOnly {
		if err := CheckSections(o.File, o.Getenv, o.Workspace, o.Gateway); err != nil {
			return nil, err
		}
	}
	if err := f.connect(ctx, o); err != nil {
		if full := f.storageErr(); full != nil {
			// The server's own refusal ("insufficient storage
			// resources") does not say which disk or what to do.
			return nil, fmt.Errorf("%w; the store is in %s: free space on its disk and start again (%w)", full, f.Storage.Dir(), err)
		}
		return nil, err
	}
	if o.ClientOnly {
		ok = true
		return f, nil
	}
	if err := os.MkdirAll(o.Workspace, 0o755); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	kv, err := f.Bus.KV(ctx, bus.BucketProfile)
	if err != nil {
		return nil, err
	}
	if _, err := profile.Seed(ctx, kv, profile.DefaultAgent, o.Workspace, profile.WithEditable(o.File.EditableProfile()), profile.WithLogger(f.log)); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.cancel = cancel
	if f.Storage != nil {
		f.goRun(runCtx, "storage guard", f.Storage.Run)
	}
	node, err := nodeID(o.DataDir)
	if err != nil {
		return nil, err
	}
	if err := f.startServices(ctx, runCtx, o, node); err != nil {
		return nil, err
	}
	ok = true
	return f, nil
}

// connect starts the embedded server or dials the external one, and
// provisions the layout; a client only checks it.
func (f *Fleet) connect(ctx context.Context, o Options) error {
	if o.ClientOnly {
		return f.join(ctx, o)
	}
	if o.File.NATS.URL != "" {
		b, err := svc.Connect(ctx, o.File, "nanofleet", f.log, nil, o.assets())
		if err != nil {
			return err
		}
		f.Bus = b
		f.closer = append(f.closer, b.Close)
		return nil
	}
	if o.Listen && o.Credentials.Password == "" {
		return errors.New("fleet: an embedded server that listens needs credentials")
	}
	ec := embeddednats.Config{StoreDir: filepath.Join(o.DataDir, "jetstream"), NoListen: !o.Listen,
		Host: o.File.NATS.Host, Port: o.File.NATS.Port, User: o.Credentials.User, Password: o.Credentials.Password}
	e, err := embeddednats.Start(ec, embeddednats.WithLogger(f.log))
	if errors.Is(err, syscall.EADDRINUSE) {
		// Not this data directory's fleet (that one is refused before),
		// so another fleet or a NATS server of the user's.
		return fmt.Errorf("%w: another NATS server, or a fleet with another data directory, listens there; set nats.port for another port, or nats.url to use that server", err)
	}
	if err != nil {
		return err
	}
	f.Embedded = e
	f.closer = append(f.closer, e.Shutdown)
	// A full disk makes the server leave the publishes it cannot write
	// unanswered, and the streams that failed a write keep failing once
	// space is back until JetStream reopens them.
	g, err := storeguard.New(storeguard.Config{Dir: ec.StoreDir, MinFree: o.StoreMinFree, Usage: e.StoreUsage}, f.Registry,
		func(context.Context) error { return e.RestartJetStream() }, storeguard.WithLogger(f.log))
	if err != nil {
		return err
	}
	g.Check(ctx)
	f.Storage = g
	b, err := bus.Connect(ctx, svc.BusConfig(o.File, "nanofleet"), bus.LogAsyncErrors(f.log), e.ConnectOption())
	if err != nil {
		return err
	}
	f.Bus = b
	f.closer = append(f.closer, b.Close)
	if err := f.serveStorage(); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l := svc.Layout(o.File)
	if l.BlobsMaxBytes == 0 {
		// Tools fill the object store at a model's will: bounded, a
		// session cannot fill the store every conversation needs.
		if _, limit, err := e.StoreUsage(); err == nil && limit > 0 {
			l.BlobsMaxBytes = min(maxBlobs, limit/4)
		}
	}
	if err := bus.Provision(pctx, b, l, o.assets()); err != nil {
		return err
	}
	f.resumeInterrupted(pctx)
	return nil
}

// maxBlobs bounds the embedded store's object store (nats.blobsMaxMB
// unset).
const maxBlobs = 1 << 30

// dial opens another connection to the fleet's server, named name, closed
// with the fleet: for a part whose round trips must not queue behind the
// workers' (the consolidator's took about 20 ms at the median on their
// connection under 100 sessions' turns, 1–2 ms on its own).
func (f *Fleet) dial(ctx context.Context, o Options, name string) (*bus.Bus, error) {
	extra := []nats.Option{bus.LogAsyncErrors(f.log)}
	if f.Embedded != nil {
		extra = append(extra, f.Embedded.ConnectOption())
	}
	b, err := bus.Connect(ctx, svc.BusConfig(o.File, name), extra...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", name, err)
	}
	f.closer = append(f.closer, b.Close)
	return b, nil
}

// join connects a client to the fleet at the config's NATS. A client
// never provisions: its config's layout (replicas above all) need not be
// the fleet's, and provisioning with it would remap the fleet's streams.
// It checks the layout instead and says once how it differs.
func (f *Fleet) join(ctx context.Context, o Options) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// No buffering while the fleet is away: a message the user sees
	// refused must not go out later behind their back (and be answered
	// twice when they send it again).
	b, err := bus.Connect(cctx, svc.BusConfig(o.File, "nanofleet-cli"), bus.LogAsyncErrors(f.log), nats.ReconnectBufSize(-1))
	if err != nil {
		return fmt.Errorf("is the fleet running? %w", err)
	}
	f.Bus = b
	f.closer = append(f.closer, b.Close)
	diffs, err := bus.CheckLayout(cctx, b, svc.Layout(o.File))
	if err != nil {
		f.log.Warn("could not check the fleet's layout", "err", err)
		return nil
	}
	for _, d := range diffs {
		if d.Missing && d.Asset.Name == b.Space.InboundStream() {
			return fmt.Errorf("%w: no fleet at %s yet (stream %s does not exist); start the fleet's services first",
				ErrNoFleet, o.File.NATS.URL, d.Asset.Name)
		}
	}
	if len(diffs) > 0 {
		s := make([]string, len(diffs))
		for i, d := range diffs {
			s[i] = d.String()
		}
		f.log.Warn("the fleet's JetStream layout differs from this config; left as it is (only the fleet's services provision it)",
			"differences", strings.Join(s, "; "))
	}
	return nil
}

// Assets declares every JetStream asset of the fleet besides the core
// layout: what its services provision. The all-in-one provisions all of
// them.
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.Join(agentworker.Assets, memoryconsolidator.Assets, channels.Assets)(sp, l)
}

// assets is what this fleet's parts use: the channels' assets only with
// the gateway. `agent -m` and `chat` run no gateway, so a cold one-shot
// does not create its buckets (a gateway provisions them when it starts).
func (o Options) assets() bus.Declare {
	if o.Gateway {
		return Assets
	}
	return bus.Join(agentworker.Assets, memoryconsolidator.Assets)
}

// goRun runs part until the fleet stops (ctx ends), recording its first
// failure. A part cut short by the stop, as one still starting is, did
// not fail.
func (f *Fleet) goRun(ctx context.Context, name string, part func(context.Context) error) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := part(ctx); err != nil && !(ctx.Err() != nil && errors.Is(err, context.Canceled)) {
			f.log.Error("fleet part failed", "part", name, "err", err)
			f.mu.Lock()
			if f.err == nil {
				f.err = fmt.Errorf("%s: %w", name, err)
				close(f.done)
			}
			f.mu.Unlock()
		}
	}()
}

// Ready reports why the fleet cannot take messages now: its NATS
// connection is down or its store is full. It is the all-in-one's
// readiness check.
func (f *Fleet) Ready(context.Context) error {
	if !f.Bus.NC.IsConnected() {
		return fmt.Errorf("nats: %s", f.Bus.NC.Status())
	}
	return f.storageErr()
}

// storageErr is the gateway's storage check: nil without a guard.
func (f *Fleet) storageErr() error {
	if f.Storage == nil {
		return nil
	}
	return f.Storage.Err()
}

// Done is closed when a part of the fleet failed; see [Fleet.Err].
func (f *Fleet) Done() <-chan struct{} { return f.done }

// Err returns the first failure of a part, if any.
func (f *Fleet) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// nodeID is this installation's name, kept in the data directory so that a
// restarted all-in-one takes over the session leases of its previous life
// at once instead of waiting for them to expire.
func nodeID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "node-id")
	if data, err := os.ReadFile(path); err == nil && len(data) > 0 {
		return string(data), nil
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	id := "aio-" + nuid.Next()
	if err := os.WriteFile(path, []byte(id), 0o644); err != nil {
		return "", fmt.Errorf("write node id: %w", err)
	}
	return id, nil
}
