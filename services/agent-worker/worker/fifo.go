package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// busy puts the message back to wait for its session, the delay doubling
// with each delivery. Not jittered: the messages waiting for one session
// are already taken one at a time by the FIFO guard, so there is no herd
// to spread, and a wait cut to half would only add FIFO checks.
func (t *turn) busy(ctx context.Context) {
	t.putBack(ctx, backoff.Backoff{Min: t.w.cfg.BusyDelay, Max: t.w.cfg.MaxBusyDelay}.Delay(int(t.meta.NumDelivered)-1))
}

// putBack naks the message to come again after delay, confirmed by the
// server (bus.NakWithDelay): a plain nak is lost while the workers'
// consumer has no leader or with the connection (its node's lame-duck
// restart), and the message then waited its whole ack wait, and the
// session's later messages behind it. Stopping, or with the bus away for
// longer than a leader election, the plain nak is all there is time for.
func (t *turn) putBack(ctx context.Context, delay time.Duration) {
	err := bus.NakWithDelay(ctx, t.w.d.Bus.NC, t.msg, delay)
	if err == nil {
		return
	}
	if ctx.Err() == nil {
		t.log.Warn("nak not confirmed", "err", err)
	}
	_ = t.msg.NakWithDelay(delay)
}

// oldest is the FIFO guard: only the oldest message still in the inbound
// stream on the subject may run. A message older than ours whose turn is
// already committed (its ack still on its way to the server) does not
// count: without that, a client answering the reply at once would find its
// next message nak'ed behind an ack in flight. Nor does one already acked
// that the stream kept (see passAcked).
func (t *turn) oldest(ctx context.Context) (bool, error) {
	ours := t.meta.Sequence.Stream
	first, err := t.onSubject(ctx, 1)
	if err != nil {
		return false, err
	}
	if first.Sequence == ours {
		return true, nil
	}
	if ok, err := t.nextAfterCommitted(ctx, first.Sequence); ok || err != nil {
		return ok, err
	}
	// Only where the guard would put the turn back: it costs a request.
	first, err = t.passAcked(ctx, first)
	if err != nil || first.Sequence == ours {
		return err == nil, err
	}
	return t.nextAfterCommitted(ctx, first.Sequence)
}

// nextAfterCommitted reports whether the message of stream sequence seq
// had its turn committed and answered and ours is the next on the subject.
func (t *turn) nextAfterCommitted(ctx context.Context, seq uint64) (bool, error) {
	// A turn this worker committed and answered needs no look at the
	// history and the replies: the session's next message, sent the moment
	// the reply arrived, often comes before the ack (6–7 % of the turns
	// in the bench's 200-session load), and the look cost it two requests.
	if !t.w.answeredHere(t.key, seq) {
		last, err := t.w.sessions.LastTurn(ctx, t.key)
		if err != nil || last.GetInboundSeq() != seq {
			return false, err
		}
		// Committed is not answered: an append that timed out may have been
		// stored while its turn failed, before its replies went out.
		if out, err := t.repliesOut(ctx, last); err != nil || !out {
			return false, err
		}
	}
	next, err := t.onSubject(ctx, seq+1)
	if err != nil {
		return false, err
	}
	return next.Sequence == t.meta.Sequence.Stream, nil
}

// passAcked returns the first message on the subject from first on that
// the workers' consumer has not acked, removing those it has from the
// stream. The server removes a message of the work-queue stream when it
// is acked, but a store can lose the removal: an all-in-one whose disk
// filled up had, after space was freed and a restart, an acked message
// back in the stream below the consumer's ack floor, and the session's
// every later message waited behind it for good. At most ours is found:
// it is not acked.
func (t *turn) passAcked(ctx context.Context, first *jetstream.RawStreamMsg) (*jetstream.RawStreamMsg, error) {
	info, err := t.w.cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("consumer info: %w", err)
	}
	floor := info.AckFloor.Stream
	for first.Sequence <= floor {
		// Failing is most likely a replica behind its leader, read by
		// onSubject, still showing a message the server removed: passed
		// over all the same.
		if err := t.w.inbound.DeleteMsg(ctx, first.Sequence); err != nil {
			t.log.Debug("removing an acked message the inbound stream kept", "seq", first.Sequence, "err", err)
		} else {
			t.log.Warn("removed an acked message the inbound stream kept", "seq", first.Sequence)
		}
		if first, err = t.onSubject(ctx, first.Sequence+1); err != nil {
			return nil, err
		}
	}
	return first, nil
}

// staleReads bounds how many times onSubject reads, over about 30 ms: a
// replica catches up with its leader within milliseconds.
const staleReads = 6

// onSubject reads the first message on the turn's subject from sequence
// from, which is at most the turn's own. A direct get is answered by any
// replica, and one behind its leader may not have the turn's message yet:
// holding it, the turn knows "not found" is stale and reads again, as
// putting it back would cost a redelivery and its busy delay.
func (t *turn) onSubject(ctx context.Context, from uint64) (*jetstream.RawStreamMsg, error) {
	waits := backoff.Backoff{Min: time.Millisecond, Max: 32 * time.Millisecond}
	for n := 0; ; n++ {
		m, err := t.w.inbound.GetMsg(ctx, from, jetstream.WithGetMsgSubject(t.msg.Subject()))
		if !errors.Is(err, jetstream.ErrMsgNotFound) || n == staleReads-1 {
			return m, err
		}
		if err := backoff.Sleep(ctx, waits.Delay(n)); err != nil {
			return nil, err
		}
	}
}

// repliesOut reports whether a committed turn's last reply is the newest
// message of its chat in the outbound stream. Anything else there (a
// follower behind its leader, another session writing to the chat) reads
// as not out: the caller waits, and the turn's ack or redelivery settles it.
func (t *turn) repliesOut(ctx context.Context, rec *nanofleetv1.TurnRecord) (bool, error) {
	replies := rec.GetReplies()
	if len(replies) == 0 {
		return true, nil
	}
	want := replies[len(replies)-1]
	sp := t.w.d.Bus.Space
	m, ok, err := t.w.d.Bus.Direct.Last(ctx, sp.OutboundStream(), sp.Outbound(want.GetChannel(), want.GetChatId()))
	if err != nil || !ok {
		return false, err
	}
	// Replies are published with their id as Nats-Msg-Id (publish).
	return m.Header.Get(nats.MsgIdHdr) == want.GetId(), nil
}

// answeredMax bounds Worker.answered, which is emptied when full: it only
// spares requests.
const answeredMax = 4096

// markAnswered records that this worker committed the session's turn of
// inbound sequence seq and its replies are stored.
func (w *Worker) markAnswered(key string, seq uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.answered) >= answeredMax {
		clear(w.answered)
	}
	w.answered[key] = seq
}

// answeredHere reports whether this worker committed and answered the
// session's turn of inbound sequence seq.
func (w *Worker) answeredHere(key string, seq uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.answered[key] == seq
}
