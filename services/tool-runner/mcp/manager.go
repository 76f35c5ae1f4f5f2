package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/pkg/toolschema"

	"github.com/nanofleet/nanofleet/services/tool-runner/netguard"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// Defaults of the timings a [Manager] uses; tests shorten them with
// options.
const (
	// DefaultConnectTimeout bounds starting a server, the MCP handshake
	// and listing what it offers.
	DefaultConnectTimeout = 60 * time.Second
	// DefaultStartWait is how long [Manager.Run] waits for servers
	// before it closes [Manager.Started]; slower ones join when they are
	// ready.
	DefaultStartWait = 20 * time.Second
	// stopTimeout bounds the wait for the servers to stop once Run's
	// context has ended.
	stopTimeout = 10 * time.Second
	// minBackoff and maxBackoff bound the wait between attempts to
	// start a server that failed.
	minBackoff = time.Second
	maxBackoff = time.Minute
	// stableAfter: a server that ran this long before dying is restarted
	// at once, with the backoff reset; one dying sooner waits the backoff.
	stableAfter = 30 * time.Second
	// keepAlive pings each server; two missed pings restart it.
	keepAlive = 30 * time.Second
	// terminateWait is how long a stdio server gets to exit after its
	// stdin is closed, and again after SIGTERM, before SIGKILL.
	terminateWait = time.Second
	// waitDelay bounds the wait for a stdio server's stderr after it
	// exited.
	waitDelay = 2 * time.Second
	// maxResources bounds the resources and templates served as tools
	// per server, so that a server listing every file it can reach does
	// not flood the model's tool list.
	maxResources = 100
)

// Options are what a [Manager] needs.
type Options struct {
	// Servers is tools.mcpServers. Disabled servers are not started.
	Servers map[string]ServerConfig
	// Sandbox is tools.exec's sandbox config; stdio servers are confined
	// like exec commands (mode, rlimits but the CPU time limit, host uid,
	// pass-through environment).
	Sandbox sandbox.Config
	// Probe reports whether the sandbox can run (the runner's
	// [sandbox.Executor.Probe]); a stdio server is not started while it
	// fails. Nil skips the check.
	Probe func(context.Context) error
	// DataDir holds each stdio server's private directory (its HOME and
	// default working directory), <DataDir>/<token(name)>.
	DataDir string
}

// Option tunes a Manager (tests).
type Option func(*Manager)

// WithLogger sets the logger of warnings about servers and their stderr
// (debug); the default discards.
func WithLogger(l *slog.Logger) Option { return func(m *Manager) { m.log = observe.OrDiscard(l) } }

// WithConnectTimeout sets how long a server gets to start and answer the
// handshake and listings (default [DefaultConnectTimeout]).
func WithConnectTimeout(d time.Duration) Option { return func(m *Manager) { m.connectTimeout = d } }

// WithStartWait sets how long [Manager.Run] waits for the servers' first
// attempts before it closes [Manager.Started] (default
// [DefaultStartWait]).
func WithStartWait(d time.Duration) Option { return func(m *Manager) { m.startWait = d } }

// WithToolTimer makes after what ends a call at its toolTimeout: the
// call is cancelled, with the toolTimeout's error, when the channel
// after(toolTimeout) returns receives. The default is the system's timer.
func WithToolTimer(after func(d time.Duration) <-chan time.Time) Option {
	return func(m *Manager) { m.toolTimer = after }
}

// WithLookupEnv replaces os.LookupEnv as the source of the pass-through
// environment (tools.exec.env).
func WithLookupEnv(f func(string) (string, bool)) Option {
	return func(m *Manager) { m.launcher.lookupEnv = f }
}

// WithGuardOptions passes options to the network guard of remote servers.
func WithGuardOptions(opts ...netguard.Option) Option {
	return func(m *Manager) { m.guardOpts = append(m.guardOpts, opts...) }
}

// Manager runs the configured MCP servers, keeps them connected and
// serves what they offer as runner tools. It is safe for concurrent use.
type Manager struct {
	log            *slog.Logger
	launcher       *launcher
	dataDir        string
	servers        []*server
	connectTimeout time.Duration
	startWait      time.Duration
	guardOpts      []netguard.Option
	// toolTimer, when set, ends calls at their toolTimeout instead of
	// the system's timer (tests).
	toolTimer func(d time.Duration) <-chan time.Time

	catalog *catalog

	running atomic.Bool
	started chan struct{} // closed once the first attempts are in, see Started
	wg      sync.WaitGroup
}

// New validates the servers' configs and returns a Manager. It starts
// nothing; [Manager.Run] does.
func New(o Options, opts ...Option) (*Manager, error) {
	if err := ValidateServers(o.Servers); err != nil {
		return nil, err
	}
	if err := o.Sandbox.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{
		log:            slog.New(slog.DiscardHandler),
		launcher:       &launcher{cfg: o.Sandbox, probe: o.Probe, lookupEnv: os.LookupEnv},
		dataDir:        o.DataDir,
		connectTimeout: DefaultConnectTimeout,
		startWait:      DefaultStartWait,
		started:        make(chan struct{}),
	}
	for _, opt := range opts {
		opt(m)
	}
	log := m.log.With("component", "mcp")
	m.log, m.launcher.log, m.catalog = log, log, newCatalog(log)
	for _, name := range slices.Sorted(maps.Keys(o.Servers)) {
		c := o.Servers[name]
		if c.Disabled {
			log.Info("MCP server disabled in the config", "server", name)
			continue
		}
		if c.Transport() == TransportStdio && m.dataDir == "" {
			return nil, fmt.Errorf("mcp: Options.DataDir is required for stdio servers")
		}
		if err := checkSandboxFit(name, c, o.Sandbox, globalNodeModules, m.home(name)); err != nil {
			return nil, err
		}
		s, err := newServer(m, name, c)
		if err != nil {
			return nil, err
		}
		m.servers = append(m.servers, s)
	}
	return m, nil
}

// Run starts every server in the background and keeps them connected
// until ctx ends: servers that failed are logged and retried with backoff,
// and their tools appear when they connect. [Manager.Started] is closed
// once each server has connected or failed a first time, or after the
// start wait (20 s). When ctx ends Run withdraws every tool, stops the
// servers (stdio servers get their stdin closed, then SIGTERM, then
// SIGKILL for their whole sandbox) and waits for that, at most 10 s,
// before it returns. A Manager runs once: a second Run returns
// [ErrRunning].
func (m *Manager) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	// The servers stop after their tools are withdrawn, not with ctx.
	srvCtx, stopServers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServers()
	for _, s := range m.servers {
		m.wg.Add(1)
		go s.supervise(srvCtx)
	}
	m.awaitFirstAttempts(ctx)
	close(m.started)
	<-ctx.Done()

	m.catalog.close(context.WithoutCancel(ctx), m.servers)
	stopServers()
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("mcp: servers still stopping after %s", stopTimeout)
	}
}

// awaitFirstAttempts waits until every server has connected or failed a
// first time, at most the start wait or until ctx ends.
func (m *Manager) awaitFirstAttempts(ctx context.Context) {
	wait := time.NewTimer(m.startWait)
	defer wait.Stop()
	for _, s := range m.servers {
		select {
		case <-s.firstDone:
		case <-wait.C:
			m.log.Warn("MCP servers still starting; their tools will be served when they are ready", "waited", m.startWait)
			return
		case <-ctx.Done():
			return
		}
	}
}

// Started is closed once [Manager.Run]'s servers have each connected or
// failed a first time, or the start wait has passed, or Run's context
// ended first.
func (m *Manager) Started() <-chan struct{} { return m.started }

// Serve publishes the tools of the connected servers with p, and from then
// on every change: a server's tools are withdrawn while it cannot be
// reached and published again when it is back.
func (m *Manager) Serve(ctx context.Context, p Publisher) { m.catalog.serve(ctx, p, m.servers) }

// Get returns a published tool and its compiled schema.
func (m *Manager) Get(name string) (tools.Tool, *toolschema.Schema, bool) {
	return m.catalog.get(name)
}

// Definitions returns the definitions of the published tools, sorted by
// name.
func (m *Manager) Definitions() []toolschema.Tool { return m.catalog.definitions() }

// Names lists the published tools, sorted.
func (m *Manager) Names() []string {
	defs := m.Definitions()
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	return names
}

// Status describes every server, sorted by name.
func (m *Manager) Status() []ServerStatus {
	out := make([]ServerStatus, 0, len(m.servers))
	for _, s := range m.servers {
		out = append(out, s.status())
	}
	return out
}

// home is a stdio server's private directory.
func (m *Manager) home(name string) string {
	return filepath.Join(m.dataDir, subject.Token(name))
}
