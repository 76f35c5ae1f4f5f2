package consolidator

import (
	"context"
	"log/slog"
	"sync"

	"github.com/nanofleet/nanofleet/pkg/memory"
)

// slot is a request's place among the pull loop's Config.Slots
// (bus.PullReleasing). Were a request to keep it through every wait, a
// batch could never hold more chunks than there are slots, whatever
// Config.BatchMax. So a request whose chunk waits in a document's queue
// behind another round gives its slot back, and the process pulls another
// request meanwhile. It never takes it back: retaking it would compete
// with the pull loop, and a request holding its session's lease could wait
// for slots all held by repeated requests of that session, waiting for
// the lease. What the slots bounded is bounded instead by:
//   - the model calls: a round holds one of the process's Config.Slots
//     holds (groups.holding) while it holds a document, slot or not, and
//     only a round holding a document asks the model;
//   - the requests held unacknowledged: at most Config.BatchMax given-back
//     slots per document (a batch's worth) and Config.Slots × BatchMax in
//     all (as many as the Slots batches that can run at once take), so a
//     process holds at most Slots × (BatchMax+1) requests, and what more
//     are due stays in the stream for other processes. A request given
//     back stays in progress (InProgress) until it ends, as before.
type slot struct {
	// release gives the slot back; nil when there is none to give
	// (Handle, or rounds run directly).
	release func()
	// given is set once release was called; guarded by groups.mu.
	given bool
}

// groups coalesces this process's rounds per memory document: while one
// round (the leader) holds a document, the rounds that want it queue, and
// the next leader takes them all into one model call and one write.
type groups struct {
	mu sync.Mutex
	// docs holds a group for each document some round leads.
	docs map[string]*group
	// running counts, per document, the rounds of this process between
	// their start and their end (rounds).
	running map[string]int
	// given counts, per document and in all, the running requests that
	// gave their slot back.
	given    map[string]int
	givenAll int
	// changed is closed, and replaced, when a round queues or ends.
	changed chan struct{}
	// held has a token for each round holding a document (see slot).
	held chan struct{}
}

type group struct {
	queue []*part // oldest first
}

func newGroups(slots int) *groups {
	return &groups{
		docs: map[string]*group{}, running: map[string]int{}, given: map[string]int{},
		changed: make(chan struct{}), held: make(chan struct{}, slots),
	}
}

// enter counts a round of the document key in.
func (gs *groups) enter(key string) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.running[key]++
}

// leave counts a round of the document key out: it hands in no more
// chunks, and a slot it gave back no longer counts.
func (gs *groups) leave(key string, s *slot) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.running[key]--; gs.running[key] == 0 {
		delete(gs.running, key)
	}
	if s.given {
		if gs.given[key]--; gs.given[key] == 0 {
			delete(gs.given, key)
		}
		gs.givenAll--
	}
	gs.notify()
}

// giveBack gives the slot s of a round queued for the document key back
// to the pull loop, unless it was given already or the document or the
// process has as many given back as perDoc or all; gs.mu is held.
func (gs *groups) giveBack(key string, s *slot, perDoc, all int) {
	if s.release == nil || s.given || gs.given[key] >= perDoc || gs.givenAll >= all {
		return
	}
	s.given = true
	gs.given[key]++
	gs.givenAll++
	s.release() // frees a place in the pull loop; never blocks
}

// holding is hold taken within the process's Config.Slots holds of a
// document at once: a round that gave its slot back may still lead a
// batch, and the model calls stay within Slots (see slot). The token is
// taken before the document's lease, never while holding it, and its
// holders wait on nothing in the process, so the wait always ends.
func (gs *groups) holding(hold holder) holder {
	return func(ctx context.Context, scope memory.Scope, log *slog.Logger) (context.Context, func(), error) {
		select {
		case gs.held <- struct{}{}:
		case <-ctx.Done():
			return nil, nil, context.Cause(ctx)
		}
		job, release, err := hold(ctx, scope, log)
		if err != nil {
			<-gs.held
			return nil, nil, err
		}
		return job, func() { release(); <-gs.held }, nil
	}
}

// notify wakes leaders waiting for rounds; gs.mu is held.
func (gs *groups) notify() {
	close(gs.changed)
	gs.changed = make(chan struct{})
}
