package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/textcut"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/subagent"
)

// commit appends the turn record, publishes the replies and acks. What
// is left (clearing the checkpoint, counting tokens, memory) is done by
// settle once the session is let go. A non-nil info has memory learn from
// the turn.
func (t *turn) commit(ctx context.Context, hist *session.History, rec *nanofleetv1.TurnRecord, info *nanofleetv1.SessionInfo) error {
	w := t.w
	replies := t.state.seal(t.id, rec.Usage)
	rec.TurnId = t.id
	rec.SenderId = t.in.GetSenderId()
	rec.InboundId = t.in.GetId()
	rec.InboundSeq = t.meta.Sequence.Stream
	rec.SessionKey = t.key
	rec.Replies = replies
	rec.CompletedAt = timestamppb.Now()
	seq, err := w.sessions.Append(ctx, t.key, rec, hist.LastSeq)
	if errors.Is(err, session.ErrConflict) {
		// Only this turn's own earlier append can have moved the history
		// while we hold the lease; a re-read tells.
		again, lerr := w.sessions.LoadHistory(ctx, t.key, hist.LastSeq)
		if lerr != nil {
			return lerr
		}
		if again.Find(rec.InboundSeq) == nil {
			return fmt.Errorf("commit turn: %w", err)
		}
		seq = again.LastSeq
	} else if err != nil {
		return fmt.Errorf("commit turn: %w", err)
	}
	hist.Turns = append(hist.Turns, session.Turn{Seq: seq, Record: rec})
	hist.LastSeq = seq
	if err := t.publish(ctx, replies); err != nil {
		// The turn is in the history, so the FIFO guard would let the
		// session's next message run; its reply must not overtake ours.
		// Keep the lease until it expires or this message's redelivery
		// takes it over and republishes the replies.
		t.state.holdLease()
		return err
	}
	w.markAnswered(t.key, rec.InboundSeq)
	// The turn is durable and answered. The ack goes out first: the
	// session's next message, often published the moment our reply
	// arrived, then usually finds itself the oldest in the stream, and the
	// FIFO guard needs one request instead of three. Then the turn ends,
	// the session is let go, and settle does the bookkeeping, waiting for
	// the ack's confirmation first.
	acked := bus.Ack(ctx, w.d.Bus.NC, t.msg)
	t.state.commit(&committed{rec: rec, hist: hist, info: info, acked: acked})
	return nil
}

// settle does a committed turn's bookkeeping after its session is let go,
// so that the session's next message need not wait for it.
func (t *turn) settle(ctx context.Context) {
	w := t.w
	c, rev := t.state.finished()
	if c == nil {
		return
	}
	// An ack lost on its way (sent as the node leading the inbound
	// consumer handed its leadership over) left the message to come again
	// after the ack wait (10 s), and the FIFO guard held the session's
	// later messages behind it: the guard lets only the session's last
	// answered message pass unacked.
	if err := c.acked(ctx); err != nil {
		t.log.Warn("ack not confirmed; the message comes again and its turn is replayed", "err", err)
	}
	if rev != 0 {
		if err := w.sessions.ClearCheckpoint(ctx, t.key, rev); err != nil {
			t.log.Warn("clear checkpoint", "err", err)
		}
	}
	if w.budget != nil && c.rec.Usage != nil {
		if err := w.budget.add(ctx, t.in, c.rec.Usage); err != nil {
			t.log.Warn("token budget: turn not counted", "err", err)
		}
	}
	if w.d.Memory != nil && c.info != nil {
		if err := w.d.Memory.AfterTurn(ctx, t.in, t.key, subagent.Payer(t.in), c.info, c.hist, t.historyBudget()); err != nil {
			t.log.Warn("memory after turn", "err", err)
		}
	}
}

// giveUp dead-letters a message whose turn keeps dying, and tells the user.
func (t *turn) giveUp(ctx context.Context, hist *session.History, reason string) (string, error) {
	t.w.deadLetter(ctx, t.msg, t.meta, reason, false)
	t.reply(nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR, "Sorry, I could not process your message: it failed repeatedly and was set aside for an operator.")
	rec := &nanofleetv1.TurnRecord{Messages: []*nanofleetv1.ChatMessage{t.fitUser(userMessage(t.in))}}
	if err := t.commit(ctx, hist, rec, nil); err != nil {
		return "", err
	}
	return "dead_letter", nil
}

// tooLargeKeep bounds the user's message in the record of a turn that was
// too large to store.
const tooLargeKeep = 64 << 10

// tooLarge ends a turn whose record or checkpoint the store refuses for
// its size. That is deterministic, so unlike other bus failures it is not
// retried (each retry would call the model again with the same prompt):
// the message is dead-lettered at once, the user told, and the record
// keeps only the start of the user's message.
func (t *turn) tooLarge(ctx context.Context, hist *session.History, cause error) (string, error) {
	t.log.Warn("turn too large to store; set aside without retry", "err", cause)
	t.w.deadLetter(ctx, t.msg, t.meta, "turn too large to store: "+cause.Error(), false)
	t.state.drop()
	t.reply(nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR,
		"Sorry, this turn produced more than the fleet can store ("+shortError(cause)+"), so it was set aside. Please ask for less at once.")
	um := userMessage(t.in)
	if c := um.GetContent(); len(c) > tooLargeKeep {
		um.Content = textcut.Prefix(c, tooLargeKeep) + fmt.Sprintf("\n\n[nanofleet: cut from %d bytes; the turn was too large to store]", len(c))
	}
	um.Media = nil
	if err := t.commit(ctx, hist, &nanofleetv1.TurnRecord{Messages: []*nanofleetv1.ChatMessage{um}}, nil); err != nil {
		return "", err
	}
	return "dead_letter", nil
}

// deadLetter stores the message with its reason. With terminate it also
// ends the message's deliveries; otherwise the caller commits and acks it.
func (w *Worker) deadLetter(ctx context.Context, m jetstream.Msg, meta *jetstream.MsgMetadata, reason string, terminate bool) {
	err := w.d.Bus.DeadLetter(ctx, "inbound", bus.LetterOf(m, reason))
	if err != nil {
		w.log.Error("dead-letter inbound", "err", err)
		if terminate {
			_ = m.NakWithDelay(time.Second)
		}
		return
	}
	w.log.Warn("inbound message dead-lettered", "subject", m.Subject(), "seq", meta.Sequence.Stream, "reason", reason)
	if w.d.Observer.DeadLettered != nil {
		w.d.Observer.DeadLettered("inbound")
	}
	if terminate {
		_ = m.Term()
	}
}
