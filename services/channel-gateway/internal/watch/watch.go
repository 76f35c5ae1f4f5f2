// Package watch follows one chat's replies as they are produced, for
// channels that answer on a connection they hold open (the web chat's
// WebSocket, the OpenAI-compatible API's HTTP response) rather than through
// the gateway's durable per-channel consumer.
//
// A [Watcher] merges two sources: the durable replies on the chat's
// outbound subject, read with an ordered consumer that starts at the
// stream's next sequence when the watcher is created (so a reply published
// after New is never missed, even when the ordered consumer is made again
// after a lost connection or server), and
// the best-effort live messages (deltas, progress, tool hints) on the
// chat's live subject. Replies are delivered in stream order; live messages
// are dropped rather than blocking when the reader falls behind. A live
// message that reached the connection before a reply reaches C before it:
// a turn's deltas come before its final answer.
package watch

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// createWait bounds the tries to make a watcher's consumer.
const createWait = 25 * time.Second

// Watcher delivers one chat's replies and live messages on C.
type Watcher struct {
	// C receives replies and live messages while Run runs.
	C <-chan *nanofleetv1.OutboundMessage

	c chan *nanofleetv1.OutboundMessage
	// live and replies feed Run. The live subscription writes to live
	// from the connection's read loop, so a live message that arrived
	// before a reply is in live by the time the reply's handler runs.
	live    chan *nats.Msg
	replies chan *nanofleetv1.OutboundMessage
	log     *slog.Logger
	since   time.Time
	chat    string
	done    chan struct{} // closed when Run ends; unblocks the reply handler
	running atomic.Bool
	follow  *bus.Follower
	sub     *nats.Subscription
}

// Option changes a Watcher.
type Option func(*Watcher)

// WithLogger sets the logger of dropped messages; the default, and nil,
// discard.
func WithLogger(l *slog.Logger) Option { return func(w *Watcher) { w.log = observe.OrDiscard(l) } }

// WithSince makes the replies begin with those stored since t (zero: from
// now on, the default), for a request that may repeat one whose answer is
// already out. Live messages start now either way.
func WithSince(t time.Time) Option { return func(w *Watcher) { w.since = t } }

// New begins watching channel/chatID: from its return on, no reply or
// live message of the chat is missed. [Watcher.Run] delivers them; call
// it, or the watch stays on the server until its consumer is reaped.
func New(ctx context.Context, b *bus.Bus, channel, chatID string, opts ...Option) (*Watcher, error) {
	w := &Watcher{
		c: make(chan *nanofleetv1.OutboundMessage, 256), live: make(chan *nats.Msg, 256),
		replies: make(chan *nanofleetv1.OutboundMessage), log: slog.New(slog.DiscardHandler), chat: chatID, done: make(chan struct{}),
	}
	for _, o := range opts {
		o(w)
	}
	w.C = w.c
	// A channel subscription, not a callback: nats.go dispatches each
	// callback subscription on its own goroutine, and under load a turn's
	// deltas waited there while its final answer, dispatched on the
	// consumer's, overtook them (the bench saw it in 2 of 1,000 turns).
	sub, err := b.NC.ChanSubscribe(b.Space.Live(channel, chatID), w.live)
	if err != nil {
		return nil, fmt.Errorf("watch %s:%s: subscribe live: %w", channel, chatID, err)
	}
	w.sub = sub
	// The live subscription must be known to the server before anything
	// that could answer is published. A flush cut short by a lost
	// connection is sent again once it is back (the subscription with it).
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = bus.Retry(fctx, backoff.Backoff{}, func(ctx context.Context) error { return bus.Flush(ctx, b.NC) },
		func(err error, wait time.Duration) {
			w.log.Warn("watch: live subscription not confirmed, trying again", "chat", chatID, "err", err, "wait", wait)
		})
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("watch %s:%s: flush: %w", channel, chatID, err)
	}
	occ := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.Space.Outbound(channel, chatID)},
	}
	if !w.since.IsZero() {
		occ.DeliverPolicy, occ.OptStartTime = jetstream.DeliverByStartTimePolicy, &w.since
	}
	// Each try is bounded (the caller's ctx is a whole turn's: the API
	// waits 10 minutes, and a request lost with a server that died is
	// never answered), and a transient failure, such as a creation that
	// timed out while the cluster elected a leader, is tried again for up
	// to createWait.
	rctx, rcancel := context.WithTimeout(ctx, createWait)
	defer rcancel()
	if w.since.IsZero() {
		err = bus.RetryEach(rctx, backoff.Backoff{}, bus.RequestTry, func(ctx context.Context) error {
			var err error
			occ, err = b.FromNow(ctx, b.Space.OutboundStream(), occ)
			return err
		}, func(err error, wait time.Duration) {
			w.log.Warn("watch: start not read, trying again", "chat", chatID, "err", err, "wait", wait)
		})
		if err != nil {
			_ = sub.Unsubscribe()
			return nil, fmt.Errorf("watch %s:%s: %w", channel, chatID, err)
		}
	}
	w.follow, err = b.Follow(rctx, b.Space.OutboundStream(), occ, func(m jetstream.Msg) {
		out := &nanofleetv1.OutboundMessage{}
		if err := proto.Unmarshal(m.Data(), out); err != nil {
			w.log.Warn("drop malformed reply", "subject", m.Subject(), "err", err)
			return
		}
		select {
		case w.replies <- out:
		case <-w.done:
		}
	}, w.log.With("chat", chatID))
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("watch %s:%s: %w", channel, chatID, err)
	}
	return w, nil
}

// Run moves live messages and replies to C until ctx ends; before a reply
// it moves every live message already received, which arrived before it.
// Then it ends the watch, deletes its consumer (within 5 s) and returns.
// C is not closed: readers select on their own context too. Run runs
// once; a second call returns [ErrRunning].
func (w *Watcher) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer w.stop(context.WithoutCancel(ctx))
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-w.live:
			w.forwardLive(m)
		case out := <-w.replies:
			for drained := false; !drained; {
				select {
				case m := <-w.live:
					w.forwardLive(m)
				default:
					drained = true
				}
			}
			select {
			case w.c <- out:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// forwardLive passes a live message on, or drops it when the reader is
// behind.
func (w *Watcher) forwardLive(m *nats.Msg) {
	out := &nanofleetv1.OutboundMessage{}
	if err := proto.Unmarshal(m.Data, out); err != nil {
		w.log.Warn("drop malformed live message", "subject", m.Subject, "err", err)
		return
	}
	select {
	case w.c <- out:
	default:
		w.log.Debug("watcher behind, live message dropped", "chat", w.chat)
	}
}

// stop ends the watch and deletes its consumer (see [bus.Follower.Stop]).
func (w *Watcher) stop(ctx context.Context) {
	close(w.done)
	_ = w.sub.Unsubscribe()
	w.follow.Stop(ctx)
}
