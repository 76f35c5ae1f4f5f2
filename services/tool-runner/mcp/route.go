package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nanofleet/nanofleet/pkg/toolschema"

	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// Routing: a call of one of a server's tools goes to the server's current
// connection, waits while it starts or restarts, runs a read-only call
// once more after a lost connection, and turns failures into errors the
// model can act on. It only reads the server's [life].

// session returns the connection other than avoid, waiting while the
// server is starting or restarting.
func (s *server) session(ctx context.Context, avoid *conn) (*conn, error) {
	for {
		cur, changed := s.life.snapshot()
		switch {
		case cur.state == StateReady && cur.conn != avoid:
			return cur.conn, nil
		case cur.state == StateStopped:
			return nil, ErrStopped
		case cur.state == StateDown:
			return nil, fmt.Errorf("%w: MCP server %q cannot be reached (%v); it is retried in the background", ErrUnavailable, s.name, cur.lastErr)
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
	ctx, cancel := s.withToolTimeout(ctx)
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

// withToolTimeout returns ctx ending at the server's toolTimeout, with
// errToolTimeout as its cause.
func (s *server) withToolTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	after := s.m.toolTimer
	if after == nil {
		return context.WithTimeoutCause(ctx, s.cfg.Timeout(), errToolTimeout)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	fired := after(s.cfg.Timeout())
	go func() {
		select {
		case <-fired:
			cancel(errToolTimeout)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// lostGrace is how long a failed call waits to see whether its connection
// ended (the reader fails the call a moment before the session ends).
const lostGrace = 200 * time.Millisecond

// explain turns a call's failure into an error for the model.
func (s *server) explain(ctx context.Context, it *item, err error) error {
	var (
		wire    *jsonrpc.Error
		toolErr *ToolError
	)
	switch {
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), errToolTimeout):
		msg := fmt.Sprintf("%s did not finish within %s (the toolTimeout of MCP server %q) and was cancelled", it.name, s.cfg.Timeout(), s.name)
		if cur, _ := s.life.snapshot(); cur.state != StateReady && cur.lastErr != nil {
			msg += fmt.Sprintf("; the server is %s after: %v", cur.state, cur.lastErr)
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
