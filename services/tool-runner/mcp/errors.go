package mcp

import (
	"context"
	"errors"
	"fmt"
)

var (
	// ErrUnavailable: the server is not connected (it failed to start, or
	// died and is being restarted); the error says why.
	ErrUnavailable = errors.New("MCP server unavailable")
	// ErrTimeout: the server did not answer within its toolTimeout. It
	// matches context.DeadlineExceeded, so the model sees a time-out.
	ErrTimeout = fmt.Errorf("MCP call timed out: %w", context.DeadlineExceeded)
	// ErrMalformed: the server answered with something that is not a
	// valid MCP result.
	ErrMalformed = errors.New("malformed MCP result")
	// ErrConnectionLost: the server's connection ended during the call.
	ErrConnectionLost = errors.New("MCP server connection lost")
	// ErrStopped: the manager has stopped (its Run ended).
	ErrStopped = errors.New("MCP manager stopped")
	// ErrRunning is returned by a second call of [Manager.Run].
	ErrRunning = errors.New("MCP manager already running")
)

// ToolError is a call the server itself reported as failed (isError in
// the result); its text is the server's message.
type ToolError struct {
	Server, Tool, Text string
}

func (e *ToolError) Error() string {
	if e.Text == "" {
		return fmt.Sprintf("MCP tool %s of server %s reported an error without a message", e.Tool, e.Server)
	}
	return e.Text
}

// timeoutError is a call that ran out of time; it matches [ErrTimeout]
// and context.DeadlineExceeded.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Unwrap() []error { return []error{ErrTimeout, context.DeadlineExceeded} }
