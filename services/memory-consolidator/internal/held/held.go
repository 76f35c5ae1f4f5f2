// Package held keeps a lease from pkg/lease for the length of a job: it
// waits for a lease someone else holds (woken by its release, polling for
// its expiry), renews it in the background, and cancels the job's context
// when the lease is lost.
package held

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/every"
	"github.com/nanofleet/nanofleet/pkg/lease"
)

// Leases hands out held leases from the fleet's lease bucket.
type Leases struct {
	t     *lease.Table
	kv    jetstream.KeyValue
	renew time.Duration
	// poll is the first wait between attempts on a held lease, doubling
	// up to pollMax.
	poll, pollMax time.Duration
	// n makes each Take's owner name unique: pkg/lease hands a lease held
	// under the same name to its asker (a restarted holder), and the jobs
	// of one process must not share a lease.
	n atomic.Uint64
}

// Open returns the fleet's leases; they are renewed at a third of the
// bucket's TTL.
func Open(ctx context.Context, b *bus.Bus) (*Leases, error) {
	kv, err := b.KV(ctx, bus.BucketLeases)
	if err != nil {
		return nil, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("lease bucket status: %w", err)
	}
	ttl := st.TTL()
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	return New(kv, ttl/3), nil
}

// New returns leases from kv renewed every renew.
func New(kv jetstream.KeyValue, renew time.Duration) *Leases {
	return &Leases{t: lease.NewTable(kv), kv: kv, renew: renew, poll: 50 * time.Millisecond, pollMax: 500 * time.Millisecond}
}

// Lease is a held lease and the context of the job under it.
type Lease struct {
	l      *lease.Lease
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// Take acquires key for owner, waiting up to wait while another holds it
// and calling tick about every second meanwhile (e.g. to tell JetStream the
// message is in progress). A waiter watches the key and tries again as
// soon as the holder releases it; it also polls, for a lease that expires
// (expiry writes nothing a watch sees). The returned context ends when
// the lease is lost or released. lease.ErrHeld means the wait was not
// enough. The lease is held as "<owner>/<n>", unique within the process.
func (ls *Leases) Take(ctx context.Context, key, owner string, wait time.Duration, tick func()) (*Lease, context.Context, error) {
	owner = owner + "/" + strconv.FormatUint(ls.n.Add(1), 10)
	deadline := time.Now().Add(wait)
	lastTick := time.Now()
	polls, waits := backoff.Backoff{Min: ls.poll, Max: ls.pollMax}, 0
	var released <-chan jetstream.KeyValueEntry
	watched := false
	for {
		l, err := ls.t.Acquire(ctx, key, owner)
		if err == nil {
			jobCtx, cancel := context.WithCancelCause(ctx)
			h := &Lease{l: l, cancel: cancel, done: make(chan struct{})}
			go h.keep(jobCtx, ls.renew)
			return h, jobCtx, nil
		}
		if !errors.Is(err, lease.ErrHeld) || time.Now().After(deadline) {
			return nil, nil, err
		}
		if !watched && wait > 0 {
			watched = true
			// Without the watch the poll alone finds the release.
			if w, err := ls.kv.Watch(ctx, key, jetstream.UpdatesOnly()); err == nil {
				defer func() { _ = w.Stop() }()
				released = w.Updates()
				continue // a release before the watch began is not in it
			}
		}
		if tick != nil && time.Since(lastTick) >= time.Second {
			tick()
			lastTick = time.Now()
		}
		if err := waitRelease(ctx, released, polls.Delay(waits)); err != nil {
			return nil, nil, err
		}
		waits++
	}
}

// waitRelease waits for d or until updates brings a delete (a release),
// whichever comes first; a nil updates waits d.
func waitRelease(ctx context.Context, updates <-chan jetstream.KeyValueEntry, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		case e, ok := <-updates:
			switch {
			case !ok:
				updates = nil // the watch ended: the timer is left
			case e != nil && e.Operation() != jetstream.KeyValuePut:
				return nil
			}
		}
	}
}

func (h *Lease) keep(ctx context.Context, period time.Duration) {
	defer close(h.done)
	every.Tick(ctx, period, func() bool {
		err := h.l.Renew(ctx)
		if err != nil && ctx.Err() == nil {
			h.cancel(fmt.Errorf("%w: %w", ErrLost, err))
		}
		return err == nil
	})
}

// Release stops renewing and gives the lease up.
func (h *Lease) Release(ctx context.Context) error {
	h.cancel(nil)
	<-h.done
	return h.l.Release(ctx)
}
