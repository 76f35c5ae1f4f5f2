package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nanofleet/nanofleet/pkg/toolschema"

	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// clientVersion is what the runner tells servers about itself.
const clientVersion = "0.1.0"

// State is where a server is in its life.
type State string

// States of a server.
const (
	// StateStarting: the first attempt to connect is running.
	StateStarting State = "starting"
	// StateReady: connected; its tools are served.
	StateReady State = "ready"
	// StateRestarting: the connection was lost and is being made again;
	// calls wait for it (within their timeout).
	StateRestarting State = "restarting"
	// StateDown: the last attempt failed; the next one comes after a
	// backoff, and its tools are withdrawn until then.
	StateDown State = "down"
	// StateStopped: the manager stopped.
	StateStopped State = "stopped"
)

// ServerStatus describes one server for operators and tests.
type ServerStatus struct {
	Name      string
	Transport Transport
	State     State
	// Tools is how many tools (resources and prompts included) it serves.
	Tools int
	// PID of the stdio server's process (bubblewrap's in bwrap mode);
	// 0 when it is not running or not a stdio server.
	PID int
	// Restarts counts the connections lost since start.
	Restarts int
	// LastError is why the last attempt failed or the connection ended.
	LastError string
}

// conn is one session with a server.
type conn struct {
	sess *mcpsdk.ClientSession
	proc *process      // stdio only
	done chan struct{} // closed when the session has ended
	err  error         // why it ended; set before done is closed
}

// ended reports whether the session has ended, waiting up to grace for it
// (a call fails a moment before its connection is seen to end).
func (c *conn) ended(grace time.Duration) bool {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// server is one configured MCP server and its supervisor.
type server struct {
	m      *Manager
	name   string
	cfg    ServerConfig
	tr     Transport
	log    *slog.Logger
	stderr *stderrLog
	http   *http.Client

	listChanged chan struct{}
	health      chan struct{}
	firstDone   chan struct{}
	firstOnce   sync.Once

	mu       sync.Mutex
	state    State
	conn     *conn // while ready
	lastErr  error
	changed  chan struct{} // closed and replaced at every state change
	restarts int
	served   []tools.Tool
}

func newServer(m *Manager, name string, c ServerConfig) (*server, error) {
	log := m.log.With("server", name)
	s := &server{
		m: m, name: name, cfg: c, tr: c.Transport(), log: log,
		stderr:      &stderrLog{log: log},
		listChanged: make(chan struct{}, 1),
		health:      make(chan struct{}, 1),
		firstDone:   make(chan struct{}),
		state:       StateStarting,
		changed:     make(chan struct{}),
	}
	if s.tr != TransportStdio {
		hc, err := httpClient(c, m.guardOpts...)
		if err != nil {
			return nil, fmt.Errorf("tools.mcpServers.%s: %w", name, err)
		}
		s.http = hc
	}
	return s, nil
}

// setState records a state change and wakes the callers waiting on it.
// s.mu must be held.
func (s *server) setState(st State, err error) {
	s.state = st
	if err != nil {
		s.lastErr = err
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *server) status() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ServerStatus{Name: s.name, Transport: s.tr, State: s.state, Tools: len(s.served), Restarts: s.restarts}
	if s.lastErr != nil {
		st.LastError = s.lastErr.Error()
	}
	if c := s.conn; c != nil && c.proc != nil && c.proc.cmd.Process != nil && s.state == StateReady {
		st.PID = c.proc.cmd.Process.Pid
	}
	return st
}

func (s *server) definitions() []toolschema.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	defs := make([]toolschema.Tool, len(s.served))
	for i, t := range s.served {
		defs[i] = t.Definition()
	}
	toolschema.SortTools(defs)
	return defs
}

// supervise connects, serves, and reconnects the server until ctx ends.
func (s *server) supervise(ctx context.Context) {
	defer s.m.wg.Done()
	defer s.shutdown()
	backoff := minBackoff
	for ctx.Err() == nil {
		start := time.Now()
		c, err := s.open(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.down(err, backoff)
			s.firstOnce.Do(func() { close(s.firstDone) })
			if sleep(ctx, backoff) != nil {
				return
			}
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		s.firstOnce.Do(func() { close(s.firstDone) })
		reason := s.watch(ctx, c)
		if ctx.Err() != nil {
			return
		}
		s.lost(c, reason)
		if time.Since(start) >= stableAfter {
			backoff = minBackoff
			continue
		}
		if sleep(ctx, backoff) != nil {
			return
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// open starts (stdio) or reaches (HTTP) the server, makes the MCP
// handshake, lists what it offers and publishes it.
func (s *server) open(ctx context.Context) (*conn, error) {
	// The session lives until it is closed, so it gets a ctx that only
	// the watchdog cancels (the SSE stream is bound to it).
	sessCtx, cancel := context.WithCancel(ctx)
	var fired atomic.Bool
	watchdog := time.AfterFunc(s.m.connectTimeout, func() {
		fired.Store(true)
		cancel()
	})
	defer watchdog.Stop()
	timedOut := func(err error) error {
		if fired.Load() {
			return fmt.Errorf("no answer within %s: %w", s.m.connectTimeout, err)
		}
		return err
	}

	var transport mcpsdk.Transport
	var proc *process
	switch s.tr {
	case TransportStdio:
		p, err := s.m.launcher.command(sessCtx, s.name, s.cfg, s.m.home(s.name), s.stderr)
		if err != nil {
			cancel()
			return nil, err
		}
		proc = p
		transport = &mcpsdk.CommandTransport{Command: p.cmd, TerminateDuration: terminateWait}
	case TransportSSE:
		transport = &mcpsdk.SSEClientTransport{Endpoint: s.cfg.URL, HTTPClient: s.http}
	default:
		transport = &mcpsdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: s.http, MaxRetries: 2}
	}
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "nanofleet", Version: clientVersion}, &mcpsdk.ClientOptions{
		Logger:                     s.log.With("sdk", true),
		Capabilities:               &mcpsdk.ClientCapabilities{},
		ToolListChangedHandler:     func(context.Context, *mcpsdk.ToolListChangedRequest) { s.signal(s.listChanged) },
		PromptListChangedHandler:   func(context.Context, *mcpsdk.PromptListChangedRequest) { s.signal(s.listChanged) },
		ResourceListChangedHandler: func(context.Context, *mcpsdk.ResourceListChangedRequest) { s.signal(s.listChanged) },
		LoggingMessageHandler: func(_ context.Context, r *mcpsdk.LoggingMessageRequest) {
			if r != nil && r.Params != nil {
				s.log.Debug("MCP server log", "level", r.Params.Level, "logger", r.Params.Logger, "data", r.Params.Data)
			}
		},
		KeepAlive:                 keepAlive,
		KeepAliveFailureThreshold: 2,
	})
	sess, err := client.Connect(sessCtx, transport, nil)
	if proc != nil {
		proc.afterStart()
	}
	if err != nil {
		if proc != nil {
			proc.kill()
		}
		err = s.withStderr(timedOut(fmt.Errorf("connect: %w", err)))
		cancel()
		return nil, err
	}
	c := &conn{sess: sess, proc: proc, done: make(chan struct{})}
	go func() {
		c.err = sess.Wait()
		close(c.done)
		cancel() // sessCtx also ends with ctx (Stop)
	}()
	items, err := s.discover(sessCtx, sess)
	if err != nil {
		err = s.withStderr(timedOut(err))
		s.closeConn(c)
		return nil, err
	}
	if !watchdog.Stop() {
		s.closeConn(c)
		return nil, fmt.Errorf("no answer within %s", s.m.connectTimeout)
	}
	s.up(c, items)
	return c, nil
}

func (s *server) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// withStderr adds what a stdio server last wrote to stderr to an error.
func (s *server) withStderr(err error) error {
	if s.tr != TransportStdio {
		return err
	}
	if tail := s.stderr.Tail(); tail != "" {
		return fmt.Errorf("%w; the server's stderr ends with: %s", err, tail)
	}
	return err
}

// discover lists the server's tools, resources, templates and prompts and
// turns the enabled ones into tools.
func (s *server) discover(ctx context.Context, sess *mcpsdk.ClientSession) ([]tools.Tool, error) {
	caps := &mcpsdk.ServerCapabilities{}
	if r := sess.InitializeResult(); r != nil && r.Capabilities != nil {
		caps = r.Capabilities
	}
	var items []*item
	if caps.Tools != nil {
		for t, err := range sess.Tools(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("list tools: %w", err)
			}
			if t == nil {
				continue
			}
			it, err := toolItem(t)
			if err != nil {
				s.log.Warn("MCP tool skipped: its input schema is not usable", "tool", t.Name, "err", err)
				continue
			}
			items = append(items, it)
		}
	}
	// A listing the server does not support (a JSON-RPC error) is
	// skipped; any other failure fails the discovery, so that a broken
	// connection never replaces a full set of tools by a partial one.
	optional := func(what string, err error) error {
		var wire *jsonrpc.Error
		if errors.As(err, &wire) {
			s.log.Warn("MCP server's "+what+" not served: listing failed", "err", err)
			return nil
		}
		return fmt.Errorf("list %s: %w", what, err)
	}
	resources := 0
	if caps.Resources != nil {
	resourceList:
		for r, err := range sess.Resources(ctx, nil) {
			switch {
			case err != nil:
				if err := optional("resources", err); err != nil {
					return nil, err
				}
				break resourceList
			case r == nil:
			case resources >= maxResources:
				resources++
			default:
				resources++
				items = append(items, resourceItem(r))
			}
		}
	templateList:
		for r, err := range sess.ResourceTemplates(ctx, nil) {
			switch {
			case err != nil:
				if err := optional("resource templates", err); err != nil {
					return nil, err
				}
				break templateList
			case r == nil:
			case resources >= maxResources:
				resources++
			default:
				resources++
				it, err := templateItem(r)
				if err != nil {
					s.log.Warn("MCP resource template skipped", "template", r.Name, "err", err)
					continue
				}
				items = append(items, it)
			}
		}
		if resources > maxResources {
			s.log.Warn("MCP server lists too many resources; only the first ones are served as tools", "served", maxResources, "listed", resources)
		}
	}
	if caps.Prompts != nil {
		for p, err := range sess.Prompts(ctx, nil) {
			if err != nil {
				if err := optional("prompts", err); err != nil {
					return nil, err
				}
				break
			}
			if p != nil {
				items = append(items, promptItem(p))
			}
		}
	}
	items = assignNames(s.name, items)
	if !s.cfg.allEnabled() {
		items = s.filter(items)
	}
	ts := make([]tools.Tool, len(items))
	for i, it := range items {
		it.def.Name = it.name
		ts[i] = itemTool{s: s, it: it}
	}
	return ts, nil
}

// filter keeps the items enabledTools names and warns about names that
// match nothing.
func (s *server) filter(items []*item) []*item {
	var kept []*item
	for _, it := range items {
		if enabled(s.cfg.EnabledTools, it) {
			kept = append(kept, it)
		}
	}
	for _, e := range s.cfg.EnabledTools {
		found := false
		for _, it := range items {
			if enabled([]string{e}, it) {
				found = true
				break
			}
		}
		if !found {
			names := make([]string, len(items))
			for i, it := range items {
				names[i] = it.name
			}
			s.log.Warn("enabledTools entry matches nothing the MCP server offers", "entry", e, "available", names)
		}
	}
	return kept
}

// up records a new session and publishes its tools.
func (s *server) up(c *conn, ts []tools.Tool) {
	set, err := tools.NewSet(ts...)
	if err != nil {
		// assignNames makes names unique and valid; schemas compiled.
		s.log.Error("MCP tools not served", "err", err)
		ts, set = nil, nil
	}
	s.mu.Lock()
	was := s.state
	s.conn, s.served = c, ts
	s.setState(StateReady, nil)
	s.mu.Unlock()
	if set == nil {
		set, _ = tools.NewSet()
	}
	s.m.publish(s, ts, set)
	attrs := []any{"transport", s.tr, "tools", len(ts)}
	if c.proc != nil && c.proc.cmd.Process != nil {
		attrs = append(attrs, "pid", c.proc.cmd.Process.Pid)
	}
	if was == StateStarting {
		s.log.Info("MCP server connected", attrs...)
	} else {
		s.log.Info("MCP server reconnected", attrs...)
	}
}

// republish serves a new listing of a connected server.
func (s *server) republish(ts []tools.Tool) {
	set, err := tools.NewSet(ts...)
	if err != nil {
		s.log.Error("MCP tools not served", "err", err)
		return
	}
	s.mu.Lock()
	s.served = ts
	s.mu.Unlock()
	s.m.publish(s, ts, set)
	s.log.Info("MCP server's tools changed", "tools", len(ts))
}

// down records a failed attempt and withdraws the server's tools, so that
// calls go to runners that have it.
func (s *server) down(err error, retryIn time.Duration) {
	s.mu.Lock()
	first := s.state == StateStarting
	same := s.lastErr != nil && s.lastErr.Error() == err.Error()
	served := len(s.served) > 0
	s.served = nil
	s.conn = nil
	s.setState(StateDown, err)
	s.mu.Unlock()
	if served {
		s.m.publish(s, nil, nil)
	}
	switch {
	case first:
		s.log.Warn("MCP server unavailable; skipped for now and retried in the background", "transport", s.tr, "err", err, "retryIn", retryIn)
	case same:
		s.log.Debug("MCP server still unavailable", "err", err, "retryIn", retryIn)
	default:
		s.log.Warn("MCP server unavailable; retrying in the background", "err", err, "retryIn", retryIn)
	}
}

// lost records a connection that ended; calls wait for the restart.
func (s *server) lost(c *conn, reason error) {
	s.closeConn(c)
	err := s.withStderr(fmt.Errorf("connection lost: %w", reason))
	s.mu.Lock()
	s.restarts++
	s.conn = nil
	s.setState(StateRestarting, err)
	s.mu.Unlock()
	s.log.Warn("MCP server exited or dropped the connection; restarting", "err", err)
}

// shutdown closes the session for good.
func (s *server) shutdown() {
	s.mu.Lock()
	c := s.conn
	s.conn, s.served = nil, nil
	s.setState(StateStopped, nil)
	s.mu.Unlock()
	s.firstOnce.Do(func() { close(s.firstDone) })
	if c != nil {
		s.closeConn(c)
	}
	closeIdle(s.http)
}

// closeConn ends a session and, for stdio, whatever is left of the
// server's process group.
func (s *server) closeConn(c *conn) {
	closed := make(chan struct{})
	go func() {
		_ = c.sess.Close()
		close(closed)
	}()
	t := time.NewTimer(3*terminateWait + time.Second)
	select {
	case <-closed:
	case <-t.C:
	}
	t.Stop()
	if c.proc != nil {
		c.proc.kill()
	}
}

// watch serves a session until it ends or ctx does, and relists what the
// server offers when it says that changed.
func (s *server) watch(ctx context.Context, c *conn) error {
	sess := c.sess
	for {
		select {
		case <-c.done:
			if c.err == nil {
				return mcpsdk.ErrConnectionClosed
			}
			return c.err
		case <-ctx.Done():
			return ctx.Err()
		case <-s.listChanged:
			lctx, cancel := context.WithTimeout(ctx, s.m.connectTimeout)
			ts, err := s.discover(lctx, sess)
			cancel()
			if err != nil {
				s.log.Warn("MCP server said its tools changed but listing them failed", "err", err)
				continue
			}
			s.republish(ts)
		case <-s.health:
			pctx, cancel := context.WithTimeout(ctx, min(s.cfg.Timeout(), 10*time.Second))
			err := sess.Ping(pctx, nil)
			cancel()
			var wire *jsonrpc.Error
			if err != nil && ctx.Err() == nil && !errors.As(err, &wire) { // an error answer is an answer
				s.log.Warn("MCP server does not answer a ping after a failed call; reconnecting", "err", err)
				_ = sess.Close()
			}
		}
	}
}

// session returns the connection other than avoid, waiting while the
// server is starting or restarting.
func (s *server) session(ctx context.Context, avoid *conn) (*conn, error) {
	for {
		s.mu.Lock()
		st, c, lastErr, changed := s.state, s.conn, s.lastErr, s.changed
		s.mu.Unlock()
		switch {
		case st == StateReady && c != avoid:
			return c, nil
		case st == StateStopped:
			return nil, ErrStopped
		case st == StateDown:
			return nil, fmt.Errorf("%w: MCP server %q cannot be reached (%v); it is retried in the background", ErrUnavailable, s.name, lastErr)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// errToolTimeout is the cause of a call's ctx ending at toolTimeout.
var errToolTimeout = errors.New("toolTimeout")

// call runs one call of an item, within the server's toolTimeout. A
// read-only item whose connection is lost during the call is run once
// more on the new connection.
func (s *server) call(ctx context.Context, it *item, c *tools.Call) (tools.Result, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.Timeout(), errToolTimeout)
	defer cancel()
	var dead *conn
	for attempt := 0; ; attempt++ {
		cn, err := s.session(ctx, dead)
		if err != nil {
			return tools.Result{}, s.explain(ctx, it, err)
		}
		res, err := do(ctx, cn.sess, it, c)
		if err == nil {
			return res, nil
		}
		var wire *jsonrpc.Error
		if ctx.Err() == nil && !errors.As(err, &wire) && cn.ended(lostGrace) {
			if it.readOnly && attempt == 0 {
				s.log.Info("MCP connection lost during a read-only call; running it again after the reconnect", "tool", it.name)
				dead = cn
				continue
			}
			err = fmt.Errorf("%w: %w", mcpsdk.ErrConnectionClosed, err)
		}
		return tools.Result{}, s.explain(ctx, it, err)
	}
}

// lostGrace is how long a failed call waits to see whether its connection
// ended (the reader fails the call a moment before the session ends).
const lostGrace = 200 * time.Millisecond

// timeoutError is a call that ran out of time; it matches [ErrTimeout]
// and context.DeadlineExceeded.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Unwrap() []error { return []error{ErrTimeout, context.DeadlineExceeded} }

// explain turns a call's failure into an error for the model.
func (s *server) explain(ctx context.Context, it *item, err error) error {
	var (
		wire    *jsonrpc.Error
		toolErr *ToolError
	)
	switch {
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), errToolTimeout):
		msg := fmt.Sprintf("%s did not finish within %s (the toolTimeout of MCP server %q) and was cancelled", it.name, s.cfg.Timeout(), s.name)
		s.mu.Lock()
		st, lastErr := s.state, s.lastErr
		s.mu.Unlock()
		if st != StateReady && lastErr != nil {
			msg += fmt.Sprintf("; the server is %s after: %v", st, lastErr)
		}
		return &timeoutError{msg: msg}
	case ctx.Err() != nil:
		return fmt.Errorf("%s (MCP server %q): %w", it.name, s.name, ctx.Err())
	case errors.As(err, &toolErr):
		toolErr.Server, toolErr.Tool = s.name, it.name
		return toolErr
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrStopped), errors.Is(err, toolschema.ErrInvalidArguments), errors.Is(err, ErrMalformed):
		return err
	case errors.Is(err, mcpsdk.ErrConnectionClosed):
		return fmt.Errorf("%w: MCP server %q closed the connection during %s (it exited, crashed or wrote something that is not JSON-RPC) and is being restarted; the call's effect is unknown", ErrConnectionLost, s.name, it.name)
	case errors.As(err, &wire):
		if wire.Code == jsonrpc.CodeInvalidParams {
			return fmt.Errorf("%w: MCP server %q rejected the arguments of %s: %s", toolschema.ErrInvalidArguments, s.name, it.name, wire.Message)
		}
		return fmt.Errorf("MCP server %q answered %s with an error: %s (code %d)", s.name, it.name, wire.Message, wire.Code)
	}
	// Anything else is an unreadable result or a transport failure: check
	// that the server still answers.
	s.signal(s.health)
	return fmt.Errorf("%w: MCP server %q gave no usable answer to %s: %w", ErrMalformed, s.name, it.name, err)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
