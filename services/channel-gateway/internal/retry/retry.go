// Package retry calls a platform's API until it answers, for the calls an
// adapter makes before it can serve (who the bot is, where to connect,
// register the webhook): a failure that may pass is retried with
// backoff.Backoff's capped, jittered waits; one the platform means for good (a
// rejected token) ends the calls. With [WithStatus] each failure is the
// channel's reason on the status board while it is tried again.
package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// Backoff is the waits between calls: from half a second, doubling up to
// 30 s, so a platform that is down for long is asked twice a minute.
func Backoff() backoff.Backoff {
	return backoff.Backoff{Min: 500 * time.Millisecond, Max: 30 * time.Second}
}

// final is an error retrying cannot help.
type final struct{ error }

func (f final) Unwrap() error { return f.error }

// Final marks err as one retrying cannot help: Until returns it at once.
func Final(err error) error { return final{err} }

// Option changes what [Until] does besides calling.
type Option func(*options)

type options struct {
	bus     *bus.Bus
	channel string
}

// WithStatus records each failure on b's status board as channel's
// state (failed, with msg and the error), so that `nanofleet channels
// status` and the dashboard say why the channel is not running while it
// is tried again. A board that cannot be opened is logged, not fatal.
func WithStatus(b *bus.Bus, channel string) Option {
	return func(o *options) { o.bus, o.channel = b, channel }
}

// Until calls f until it returns nil or a Final error (returned as it was
// before marking), or ctx ends (ctx's error), waiting by Backoff between
// calls and logging each failure as msg with the wait.
func Until(ctx context.Context, log *slog.Logger, msg string, f func(context.Context) error, opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var board *status.Board
	b := Backoff()
	for n := 0; ; n++ {
		err := f(ctx)
		var fe final
		switch {
		case err == nil:
			return nil
		case errors.As(err, &fe):
			return fe.error
		case ctx.Err() != nil:
			return ctx.Err()
		}
		wait := b.Wait(n)
		log.Warn(msg, "err", err, "in", wait)
		if o.bus != nil && board == nil {
			var berr error
			if board, berr = status.Open(ctx, o.bus); berr != nil {
				log.Warn("channel status board unusable; the failure is only logged", "err", berr)
				o.bus = nil
			}
		}
		if board != nil {
			board.Retrying(ctx, log, o.channel, fmt.Errorf("%s: %w", msg, err))
		}
		if err := backoff.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}
