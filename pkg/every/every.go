// Package every runs a function periodically until its context ends:
// the keep-alive loops of the services (message in progress, lease
// renewal, call heartbeats) and their periodic checks (the store's free
// space, a consumer's lag, a sandbox's quota).
package every

import (
	"context"
	"time"
)

// Tick calls f every d, the first time d after the start, until ctx ends
// or f returns false.
func Tick(ctx context.Context, d time.Duration, f func() bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for more := true; more; {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			more = f()
		}
	}
}

// TickNow is [Tick] that calls f at once too: a check that must hold
// from the start (the store's free space, a gauge).
func TickNow(ctx context.Context, d time.Duration, f func() bool) {
	if ctx.Err() != nil || !f() {
		return
	}
	Tick(ctx, d, f)
}

// Go runs [Tick] in a goroutine. stop ends it and returns once f is no
// longer running.
func Go(ctx context.Context, d time.Duration, f func() bool) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Tick(ctx, d, f)
	}()
	return func() { cancel(); <-done }
}
