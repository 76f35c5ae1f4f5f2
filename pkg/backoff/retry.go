package backoff

import (
	"context"
	"fmt"
	"time"
)

// Retry says how [Retry.Do] tries a call again: within the caller's
// deadline, each try bounded, again while it fails in a way that may
// pass. The zero value tries once.
type Retry struct {
	// Try bounds each try; 0 leaves it to ctx. A request lost with the
	// connection or the server it went through is never answered: only a
	// bound of its own ends the try so that the next one is sent.
	Try time.Duration
	// Again reports whether a failure may pass, so that f is tried again;
	// nil: none does.
	Again func(error) bool
	// Wait is the wait before try n+2 (n from 0), e.g. a [Backoff]'s
	// Wait; nil: the next try goes at once.
	Wait func(n int) time.Duration
	// Failed, if not nil, is told of each failure tried again and the
	// wait before the next try (to log it, or to report not ready).
	Failed func(err error, wait time.Duration)
}

// Do calls f until it succeeds, fails with an error r.Again does not
// accept (returned as it is), or ctx ends. An error of ctx's ending after
// a failure r.Again accepts matches both (errors.Is, errors.As) and
// names them on one line: "context deadline exceeded after 3 tries, the
// last: nats: timeout".
func (r Retry) Do(ctx context.Context, f func(context.Context) error) error {
	for n := 0; ; n++ {
		err := r.try(ctx, f)
		if err == nil || r.Again == nil || !r.Again(err) {
			return err
		}
		if ctx.Err() != nil {
			return gaveUp(ctx, n, err)
		}
		var wait time.Duration
		if r.Wait != nil {
			wait = r.Wait(n)
		}
		if r.Failed != nil {
			r.Failed(err, wait)
		}
		if wait > 0 && Sleep(ctx, wait) != nil {
			return gaveUp(ctx, n, err)
		}
	}
}

// try is one call of f, bounded by r.Try.
func (r Retry) try(ctx context.Context, f func(context.Context) error) error {
	if r.Try <= 0 {
		return f(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, r.Try)
	defer cancel()
	return f(ctx)
}

// gaveUp is ctx's end after try n (from 0) failed with err.
func gaveUp(ctx context.Context, n int, err error) error {
	if n == 0 {
		return fmt.Errorf("%w after 1 try: %w", ctx.Err(), err)
	}
	return fmt.Errorf("%w after %d tries, the last: %w", ctx.Err(), n+1, err)
}
