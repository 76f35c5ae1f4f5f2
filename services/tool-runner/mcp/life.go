package mcp

import (
	"sync"

	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// life is a server's mutable state. The supervisor is its only writer,
// through update; routing, status and the catalog read snapshots, and
// callers waiting for the server (starting or restarting) wait on the
// channel a snapshot returns.
type life struct {
	mu      sync.Mutex
	cur     lifeState
	changed chan struct{} // closed and replaced at every update
}

// lifeState is a server's state at one moment.
type lifeState struct {
	state State
	// conn is the session while ready; nil otherwise.
	conn *conn
	// lastErr is why the last attempt failed or the connection ended;
	// kept across later successes for status and time-out messages.
	lastErr error
	// restarts counts the connections lost since start.
	restarts int
	// served are the tools of the current listing; kept while the server
	// restarts (calls wait for it), dropped when it is down or stopped.
	served []tools.Tool
}

func newLife() *life {
	return &life{cur: lifeState{state: StateStarting}, changed: make(chan struct{})}
}

// update applies f to the state, wakes everyone waiting for a change and
// returns the state as it was before.
func (l *life) update(f func(*lifeState)) lifeState {
	l.mu.Lock()
	defer l.mu.Unlock()
	before := l.cur
	f(&l.cur)
	close(l.changed)
	l.changed = make(chan struct{})
	return before
}

// snapshot returns the current state and a channel closed at the next
// update.
func (l *life) snapshot() (lifeState, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur, l.changed
}
