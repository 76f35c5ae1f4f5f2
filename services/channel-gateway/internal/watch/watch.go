// Package watch follows one chat's replies as they are produced, for
// channels that answer on a connection they hold open (the web chat's
// WebSocket, the OpenAI-compatible API's HTTP response) rather than through
// the gateway's durable per-channel consumer.
//
// A [Watcher] merges two sources: the durable replies on the chat's
// outbound subject, read with an ordered consumer that starts at the moment
// the watcher is created (so a reply published after Start is never
// missed, and the ordered consumer recovers from a lost connection), and
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
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Watcher delivers one chat's replies and live messages on C.
type Watcher struct {
	// C receives replies and live messages until Stop.
	C <-chan *nanofleetv1.OutboundMessage

	c chan *nanofleetv1.OutboundMessage
	// live and replies feed merge. The live subscription writes to live
	// from the connection's read loop, so a live message that arrived
	// before a reply is in live by the time the reply's handler runs.
	live    chan *nats.Msg
	replies chan *nanofleetv1.OutboundMessage
	log     *slog.Logger
	chat    string
	done    chan struct{}
	once    sync.Once
	cc      jetstream.ConsumeContext
	cons    jetstream.Consumer
	js      jetstream.JetStream
	str     string
	sub     *nats.Subscription
}

// Start begins watching channel/chatID. Call Stop when done.
func Start(ctx context.Context, b *bus.Bus, log *slog.Logger, channel, chatID string) (*Watcher, error) {
	return StartSince(ctx, b, log, channel, chatID, time.Time{})
}

// StartSince is [Start] whose replies begin with those stored since the
// given time (zero: from now on), for a request that may repeat one whose
// answer is already out. Live messages start now either way.
func StartSince(ctx context.Context, b *bus.Bus, log *slog.Logger, channel, chatID string, since time.Time) (*Watcher, error) {
	w := &Watcher{
		c: make(chan *nanofleetv1.OutboundMessage, 256), live: make(chan *nats.Msg, 256),
		replies: make(chan *nanofleetv1.OutboundMessage), log: log, chat: chatID, done: make(chan struct{}),
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
	// that could answer is published.
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.NC.FlushWithContext(fctx); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("watch %s:%s: flush: %w", channel, chatID, err)
	}
	occ := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.Space.Outbound(channel, chatID)},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
		// Stop deletes it; this reaps one left by a crashed gateway.
		InactiveThreshold: 30 * time.Second,
	}
	if !since.IsZero() {
		occ.DeliverPolicy, occ.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := b.JS.OrderedConsumer(ctx, b.Space.OutboundStream(), occ)
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("watch %s:%s: %w", channel, chatID, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		out := &nanofleetv1.OutboundMessage{}
		if err := proto.Unmarshal(m.Data(), out); err != nil {
			log.Warn("drop malformed reply", "subject", m.Subject(), "err", err)
			return
		}
		select {
		case w.replies <- out:
		case <-w.done:
		}
	})
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("watch %s:%s: consume: %w", channel, chatID, err)
	}
	w.cc, w.cons, w.js, w.str = cc, cons, b.JS, b.Space.OutboundStream()
	go w.merge()
	return w, nil
}

// merge moves live messages and replies to C. Before a reply it moves
// every live message already received, which arrived before it.
func (w *Watcher) merge() {
	for {
		select {
		case <-w.done:
			return
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
			case <-w.done:
				return
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

// Stop ends the watch and deletes its consumer within ctx (pass a context
// that is not cancelled yet, e.g. context.WithoutCancel). C is not closed:
// select on your own context too.
func (w *Watcher) Stop(ctx context.Context) {
	w.once.Do(func() {
		close(w.done)
		_ = w.sub.Unsubscribe()
		w.cc.Stop()
		// Stopping an ordered consumer leaves it on the server until it is
		// inactive; delete it now, so that busy APIs do not pile them up.
		if info := w.cons.CachedInfo(); info != nil {
			go func(name string) {
				ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				_ = w.js.DeleteConsumer(ctx, w.str, name)
			}(info.Name)
		}
	})
}
