package worker

import (
	"context"
	"time"

	"github.com/nanofleet/nanofleet/pkg/lease"
)

// localTurn is a turn running in this worker.
type localTurn struct {
	cancel context.CancelCauseFunc // set once the turn has its lease
	done   chan struct{}
}

// localWait is how long a message waits in this worker for the same
// session's turn, running here, to finish: a reply is often answered at
// once, and waiting here is cheaper than a redelivery.
const localWait = 200 * time.Millisecond

// claim marks the session as running in this worker. If it already runs
// here, claim waits up to localWait for it to end; false means busy. The
// same message redelivered to this worker must not run twice, whatever
// the lease says.
func (w *Worker) claim(ctx context.Context, key string) bool {
	deadline := time.NewTimer(localWait)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		lt, ok := w.running[key]
		if !ok {
			w.running[key] = &localTurn{done: make(chan struct{})}
			w.mu.Unlock()
			return true
		}
		w.mu.Unlock()
		select {
		case <-lt.done:
		case <-deadline.C:
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
// ends; if the lease is lost it stops the turn.
func (t *turn) keepAlive(ctx context.Context, l *lease.Lease, stop context.CancelCauseFunc, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(t.w.cfg.renewEvery())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := l.Renew(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			t.log.Warn("lease renewal failed; aborting turn", "err", err)
			stop(errLeaseLost)
			return
		}
		_ = t.msg.InProgress()
	}
}
