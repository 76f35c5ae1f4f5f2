// Package retry calls a platform's API until it answers, for the calls an
// adapter makes before it can serve (who the bot is, where to connect,
// register the webhook): a failure that may pass is retried with
// backoff.Backoff's capped, jittered waits; one the platform means for good (a
// rejected token) ends the calls.
package retry

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nanofleet/nanofleet/pkg/backoff"
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

// Until calls f until it returns nil or a Final error (returned as it was
// before marking), or ctx ends (ctx's error), waiting by Backoff between
// calls and logging each failure as msg with the wait.
func Until(ctx context.Context, log *slog.Logger, msg string, f func(context.Context) error) error {
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
		if err := backoff.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}
