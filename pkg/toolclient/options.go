package toolclient

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nanofleet/nanofleet/pkg/observe"
)

// Option configures a Client.
type Option func(*Client) error

// WithLogger sets the client's logger; nil discards, as the default.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) error {
		c.log = observe.OrDiscard(l)
		return nil
	}
}

// WithLivenessTimeout sets how long a call may go without a message from
// its runner before the runner is taken for dead (default 5 s). It must
// exceed the runners' heartbeat interval.
func WithLivenessTimeout(d time.Duration) Option {
	return func(c *Client) error {
		if d < 10*time.Millisecond {
			return fmt.Errorf("%w: liveness timeout %s is below 10ms", ErrInvalidOption, d)
		}
		c.liveness = d
		return nil
	}
}

// WithCallTimeout sets the deadline of calls whose context has none
// (default 15 min: exec may run 10).
func WithCallTimeout(d time.Duration) Option {
	return func(c *Client) error {
		if d <= 0 {
			return fmt.Errorf("%w: call timeout %s must be positive", ErrInvalidOption, d)
		}
		c.callTimeout = d
		return nil
	}
}

// WithMaxRetries sets how often a read-only call interrupted by a runner's
// death, or a call rejected by a stopping runner, is sent again (default 2).
func WithMaxRetries(n int) Option {
	return func(c *Client) error {
		if n < 0 || n > 10 {
			return fmt.Errorf("%w: max retries %d not in 0..10", ErrInvalidOption, n)
		}
		c.maxRetries = n
		return nil
	}
}

// WithAllRunners says the fleet has exactly n tool runners, so Catalog
// stops gathering answers when n have answered instead of waiting out its
// window (at least 50 ms). For a fleet that cannot grow: the all-in-one
// whose embedded server accepts no other processes, as `agent -m` starts
// for one turn. Zero (the default) always waits the window.
func WithAllRunners(n int) Option {
	return func(c *Client) error {
		if n < 0 {
			return fmt.Errorf("%w: runners %d is negative", ErrInvalidOption, n)
		}
		c.allRunners = n
		return nil
	}
}
