package worker

import (
	"context"
	"errors"

	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// loadCheckpoint returns the checkpoint the turn starts from: on a
// redelivery the one this message's earlier start saved, else a fresh one.
// Its Attempts counts this start.
func (t *turn) loadCheckpoint(ctx context.Context) (*nanofleetv1.TurnCheckpoint, error) {
	cp := &nanofleetv1.TurnCheckpoint{TurnId: t.id, InboundSeq: t.meta.Sequence.Stream}
	if t.meta.NumDelivered > 1 {
		if old, _, err := t.w.sessions.Checkpoint(ctx, t.key); err == nil && old.GetInboundSeq() == cp.InboundSeq {
			cp = old
		} else if err != nil && !errors.Is(err, session.ErrNotFound) {
			return nil, err
		}
	}
	cp.Attempts++
	return cp, nil
}

// resume starts the turn from its checkpoint: the user's message if it
// has none yet, and the replies it had already made.
func (t *turn) resume(ctx context.Context, cp *nanofleetv1.TurnCheckpoint) error {
	if len(cp.Messages) == 0 {
		cp.Messages = []*nanofleetv1.ChatMessage{t.fitUser(userMessage(t.in))}
	}
	// A first delivery has nothing to resume, so its checkpoint waits for
	// the turn's first step (most turns answer without one and never
	// write it). A redelivery records its start before it runs: that is
	// what counts the attempts of a message that kills its worker.
	if t.meta.NumDelivered > 1 {
		rev, err := t.w.sessions.SaveCheckpoint(ctx, t.key, cp)
		if err != nil {
			return err
		}
		t.state.checkpointed(rev)
	}
	t.state.resume(cp.GetReplies())
	return nil
}

// checkpoint saves the turn after a model or tool step: its messages so
// far, the loop's iteration and the replies made.
func (t *turn) checkpoint(ctx context.Context, cp *nanofleetv1.TurnCheckpoint, msgs []*nanofleetv1.ChatMessage, iter int) error {
	cp.Messages, cp.Iteration, cp.Replies = msgs, int32(iter), t.state.snapshot()
	rev, err := t.w.sessions.SaveCheckpoint(ctx, t.key, cp)
	if err != nil {
		return err
	}
	t.state.checkpointed(rev)
	return nil
}
