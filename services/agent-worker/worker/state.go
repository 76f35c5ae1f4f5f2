package worker

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// state is what a running turn has produced so far. Its methods are the
// only code that changes it; the message tool and the checkpoint hook
// reach it from inside the model/tool loop, hence the mutex.
type state struct {
	mu sync.Mutex
	// replies are the turn's durable replies, in order.
	replies []*nanofleetv1.OutboundMessage
	// messaged is set when the message tool already answered the origin
	// chat, so the final answer is not sent twice.
	messaged bool
	// streamed is set once a delta of the answer went out: the final
	// answer says so (metadata streamed=true), so that a gateway that saw
	// no delta waits for the one streaming it instead of posting again.
	streamed bool
	// checkpointRev is the revision of the turn's newest checkpoint, which
	// is cleared after the commit unless a newer turn has replaced it.
	checkpointRev uint64
	// keepLease keeps the lease past the turn: its replies are not out.
	keepLease bool
	// attempts is the checkpoint's count of the turn's starts, once it
	// is loaded (0 before).
	attempts int
	// done is set once the turn is in the history, answered and acked.
	done *committed
}

// committed is what is left to do for a committed turn once its session
// is let go.
type committed struct {
	rec  *nanofleetv1.TurnRecord
	hist *session.History
	// info is set when memory should learn from the turn: it ran the model.
	info *nanofleetv1.SessionInfo
	// acked waits for the server to confirm the message's ack (bus.Ack).
	acked func(context.Context) error
}

// delta records that a delta of the answer went out.
func (s *state) delta() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streamed = true
}

// wasStreamed reports whether a delta of the answer went out.
func (s *state) wasStreamed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streamed
}

// resume starts the turn's replies from those of a checkpoint or of a
// record committed before.
func (s *state) resume(replies []*nanofleetv1.OutboundMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = replies
}

// addMessage appends a message the model sent, unless the turn has sent
// MaxMessagesPerTurn already.
func (s *state) addMessage(r *nanofleetv1.OutboundMessage, toOrigin bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, o := range s.replies {
		if o.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE {
			n++
		}
	}
	if n >= MaxMessagesPerTurn {
		return fmt.Errorf("this turn has sent %d messages, the most one turn may: put the rest into your answer", n)
	}
	s.replies = append(s.replies, r)
	s.messaged = s.messaged || toOrigin
	return nil
}

// add appends a durable reply; toOrigin says it answers the origin chat.
func (s *state) add(r *nanofleetv1.OutboundMessage, toOrigin bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, r)
	s.messaged = s.messaged || toOrigin
}

// drop forgets the replies so far (a turn set aside says only why).
func (s *state) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = nil
}

// answered reports whether the message tool already answered the origin
// chat.
func (s *state) answered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.messaged
}

// snapshot returns the replies so far, for a checkpoint.
func (s *state) snapshot() []*nanofleetv1.OutboundMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.replies)
}

// started records the checkpoint's count of the turn's starts.
func (s *state) started(attempts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts = attempts
}

// startCount is the count recorded by started (0 before).
func (s *state) startCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// checkpointed records the revision of the turn's newest checkpoint.
func (s *state) checkpointed(rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkpointRev = rev
}

// seal gives the replies their ids and marks the last, which carries the
// turn's usage, and returns them for the record.
func (s *state) seal(turn string, usage *nanofleetv1.TokenUsage) []*nanofleetv1.OutboundMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.replies {
		r.Id = replyID(turn, i)
		r.LastOfTurn = i == len(s.replies)-1
		if r.LastOfTurn {
			r.Usage = usage
		}
	}
	return s.replies
}

// holdLease keeps the lease when the turn ends.
func (s *state) holdLease() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keepLease = true
}

// leaseKept reports whether the lease outlives the turn.
func (s *state) leaseKept() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keepLease
}

// commit records that the turn is committed.
func (s *state) commit(c *committed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = c
}

// finished returns the committed turn (nil if none) and the revision of
// its newest checkpoint (0 if none).
func (s *state) finished() (*committed, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done, s.checkpointRev
}
