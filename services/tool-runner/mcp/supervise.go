package mcp

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// Supervision: one goroutine per server (supervise) starts or reaches it,
// keeps the session, restarts it with backoff and pings it when a call
// asks. It alone changes the server's [life], in up, republish, down,
// lost and shutdown, and hands each new listing to the [catalog].

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

// supervise connects, serves, and reconnects the server until ctx ends.
func (s *server) supervise(ctx context.Context) {
	defer s.m.wg.Done()
	defer s.shutdown()
	waits := backoff.Backoff{Min: minBackoff, Max: maxBackoff}
	failures := 0 // attempts since the server last ran for stableAfter
	for ctx.Err() == nil {
		start := time.Now()
		c, err := s.open(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait := waits.Wait(failures)
			failures++
			s.down(ctx, err, wait)
			s.firstOnce.Do(func() { close(s.firstDone) })
			if backoff.Sleep(ctx, wait) != nil {
				return
			}
			continue
		}
		s.firstOnce.Do(func() { close(s.firstDone) })
		reason := s.watch(ctx, c)
		if ctx.Err() != nil {
			return
		}
		s.lost(c, reason)
		if time.Since(start) >= stableAfter {
			failures = 0
			continue
		}
		if backoff.Sleep(ctx, waits.Wait(failures)) != nil {
			return
		}
		failures++
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
		// Deprecated by the protocol but served for at least a year; a
		// server's log lines help whoever debugs it meanwhile.
		//lint:ignore SA1019 see above
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
		cancel() // sessCtx also ends with ctx (Run ending)
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
	s.up(ctx, c, items)
	return c, nil
}

// up records a new session and publishes its tools.
func (s *server) up(ctx context.Context, c *conn, ts []tools.Tool) {
	set, err := tools.NewSet(ts...)
	if err != nil {
		// assignNames makes names unique and valid; schemas compiled.
		s.log.Error("MCP tools not served", "err", err)
		ts, set = nil, nil
	}
	was := s.life.update(func(l *lifeState) {
		l.state, l.conn, l.served = StateReady, c, ts
	}).state
	if set == nil {
		set, _ = tools.NewSet()
	}
	s.m.catalog.publish(ctx, s, ts, set)
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
func (s *server) republish(ctx context.Context, ts []tools.Tool) {
	set, err := tools.NewSet(ts...)
	if err != nil {
		s.log.Error("MCP tools not served", "err", err)
		return
	}
	s.life.update(func(l *lifeState) { l.served = ts })
	s.m.catalog.publish(ctx, s, ts, set)
	s.log.Info("MCP server's tools changed", "tools", len(ts))
}

// down records a failed attempt and withdraws the server's tools, so that
// calls go to runners that have it.
func (s *server) down(ctx context.Context, err error, retryIn time.Duration) {
	was := s.life.update(func(l *lifeState) {
		l.state, l.conn, l.served, l.lastErr = StateDown, nil, nil, err
	})
	first := was.state == StateStarting
	same := was.lastErr != nil && was.lastErr.Error() == err.Error()
	served := len(was.served) > 0
	if served {
		s.m.catalog.publish(ctx, s, nil, nil)
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
	s.life.update(func(l *lifeState) {
		l.state, l.conn, l.lastErr = StateRestarting, nil, err
		l.restarts++
	})
	s.log.Warn("MCP server exited or dropped the connection; restarting", "err", err)
}

// shutdown closes the session for good.
func (s *server) shutdown() {
	c := s.life.update(func(l *lifeState) {
		l.state, l.conn, l.served = StateStopped, nil, nil
	}).conn
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
			s.republish(ctx, ts)
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
