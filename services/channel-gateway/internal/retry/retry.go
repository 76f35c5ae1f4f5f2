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
	status  *status.Reporter
	channel string
}

// WithStatus records each failure as this gateway's state of channel
// through r (failed, with msg and the error), so that `nanofleet
// channels status` and the dashboard say why the channel does not run on
// this gateway while it is tried again; once a call answers, the record
// is cleared (what runs next reports). Other gateways' records are not
// touched.
func WithStatus(r *status.Reporter, channel string) Option {
	return func(o *options) { o.status, o.channel = r, channel }
}

// Until calls f until it returns nil or a Final error (returned as it was
// before marking), or ctx ends (an error matching ctx's), waiting by
// Backoff between calls and logging each failure as msg with the wait.
func Until(ctx context.Context, log *slog.Logger, msg string, f func(context.Context) error, opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	failed := false
	err := backoff.Retry{
		Again: func(err error) bool { return !errors.As(err, new(final)) },
		Wait:  Backoff().Wait,
		Failed: func(err error, wait time.Duration) {
			failed = true
			log.Warn(msg, "err", err, "in", wait)
			o.status.Retrying(ctx, log, o.channel, fmt.Errorf("%s: %w", msg, err))
		},
	}.Do(ctx, f)
	var fe final
	switch {
	case err == nil:
		if failed {
			o.status.Started(ctx, log, o.channel)
		}
		return nil
	case errors.As(err, &fe):
		return fe.error
	}
	return err
}
