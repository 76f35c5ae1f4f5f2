package worker

import (
	"context"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/every"
	"github.com/nanofleet/nanofleet/pkg/lease"
)

// localTurn is a turn running in this worker.
type localTurn struct {
	seq    uint64                  // the message's inbound stream sequence
	cancel context.CancelCauseFunc // set while the turn runs its model loop
	// stopped records a /stop that came before the model loop began:
	// the loop then ends at once.
	stopped bool
	done    chan struct{}
}

// localWait is how long a message waits in this worker for the same
// session's turn, running here, to finish: a reply is often answered at
// once, and waiting here is cheaper than a redelivery.
const localWait = 200 * time.Millisecond

// claim marks the session as running in this worker. If it already runs
// here, claim waits up to localWait for it to end; false means busy. The
// same message redelivered to this worker must not run twice, whatever
// the lease says.
func (w *Worker) claim(ctx context.Context, key string, seq uint64) bool {
	// The timer only when the session runs here: most claims find it free.
	var deadline <-chan time.Time
	for {
		w.mu.Lock()
		lt, ok := w.running[key]
		if !ok {
			w.running[key] = &localTurn{seq: seq, done: make(chan struct{})}
			w.mu.Unlock()
			return true
		}
		w.mu.Unlock()
		if deadline == nil {
			tm := time.NewTimer(localWait)
			defer tm.Stop()
			deadline = tm.C
		}
		select {
		case <-lt.done:
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func (w *Worker) unclaim(key string) {
	w.mu.Lock()
	if lt, ok := w.running[key]; ok {
		delete(w.running, key)
		close(lt.done)
	}
	w.mu.Unlock()
}

// keepAlive renews the lease and the message's ack deadline until ctx
// ends; if the lease is lost it stops the turn. The two are kept apart:
// a renewal waits out a lease bucket's leader election (seconds), and
// the ack deadline must not wait with it.
func (t *turn) keepAlive(ctx context.Context, l *lease.Lease, stop context.CancelCauseFunc, done chan<- struct{}) {
	defer close(done)
	defer bus.InProgress(ctx, t.msg, t.w.cfg.inProgressEvery())()
	every.Tick(ctx, t.w.cfg.renewEvery(), func() bool {
		if err := l.Renew(ctx); err != nil {
			if ctx.Err() == nil {
				t.log.Warn("lease renewal failed; aborting turn", "err", err)
				stop(errLeaseLost)
			}
			return false
		}
		return true
	})
}

// hold is a running turn's hold on its session: the local claim, the
// lease, and keepAlive renewing it.
type hold struct {
	t       *turn
	lease   *lease.Lease
	stop    context.CancelCauseFunc
	renewed chan struct{} // closed when keepAlive has ended
}

// hold starts keeping the claimed session's lease alive; the returned
// context ends when the lease is lost or the hold released.
func (t *turn) hold(ctx context.Context, l *lease.Lease) (context.Context, *hold) {
	ctx, stop := context.WithCancelCause(ctx)
	h := &hold{t: t, lease: l, stop: stop, renewed: make(chan struct{})}
	go t.keepAlive(ctx, l, stop, h.renewed)
	return ctx, h
}

// stoppable returns ctx ended by a /stop (cause errStopped), at once if
// one came while the turn was starting. It is for the model loop alone:
// a stop that cancelled the turn's first reads of the session failed the
// turn, which then ran again 2 s later.
func (t *turn) stoppable(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	t.w.mu.Lock()
	lt := t.w.running[t.key]
	lt.cancel = cancel
	stopped := lt.stopped
	t.w.mu.Unlock()
	if stopped {
		cancel(errStopped)
	}
	return ctx, func() { cancel(nil) }
}

// quiet ends keepAlive, and returns once it sends nothing more; the
// turn's context ends with it.
func (h *hold) quiet() {
	h.stop(nil)
	<-h.renewed
}

// release frees the session for its next message. keepLease leaves the
// lease to expire or to this message's redelivery (its replies are not
// out); the local claim is freed in any case.
func (h *hold) release(ctx context.Context, keepLease bool) {
	h.quiet()
	// Released with a fresh context: a stopped turn still frees its
	// session. Release bounds it (10 s), and sends the release again
	// while the bucket elects a leader.
	if !keepLease {
		if err := h.lease.Release(context.WithoutCancel(ctx)); err != nil {
			h.t.log.Warn("release lease", "err", err)
		}
	}
	h.t.w.unclaim(h.t.key)
}
