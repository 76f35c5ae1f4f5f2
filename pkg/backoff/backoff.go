// Package backoff gives the capped, jittered exponential waits between
// retries, a sleep that ends with its context, the loop that tries a
// call again within its caller's deadline ([Retry]), and the wait a
// server asks for ([RetryAfter]). It depends on the
// standard library alone, so that the bus, the direct get reader (which
// the bus imports) and the model client (which must not depend on NATS)
// wait and try again the same way.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is a capped, jittered exponential backoff: the n-th wait (from
// 0) is drawn from [d/2, d], d = Min·2ⁿ capped at Max. The jitter keeps
// services restarted together from retrying in step. Zero fields take the
// defaults: from a quarter second up to 15 s, so a node restart or a
// leader election is answered within a few waits, and a cluster that is
// down for minutes costs a request every 15 s.
type Backoff struct {
	Min, Max time.Duration
}

const (
	defaultMin = 250 * time.Millisecond
	defaultMax = 15 * time.Second
)

// Wait is how long to wait before retry n (from 0): [Backoff.Delay]
// with jitter.
func (b Backoff) Wait(n int) time.Duration {
	d := b.Delay(n)
	half := d / 2
	return half + rand.N(d-half+1)
}

// Delay is the n-th wait (from 0) without jitter, Min·2ⁿ capped at Max:
// for a caller with no herd of retries to spread.
func (b Backoff) Delay(n int) time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = defaultMin
	}
	if hi <= 0 {
		hi = defaultMax
	}
	hi = max(hi, lo)
	// Doubling in a loop rather than shifting: a large n cannot overflow.
	d := lo
	for i := 0; i < n && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// Sleep waits d, or until ctx ends, and returns ctx's error in that case.
// A d of zero or less does not wait; it still returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
