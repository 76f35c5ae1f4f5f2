package gateway

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Bounds of a channel's live deliveries (progress, tool hints): each is a
// platform call, so one chat's slow call must not hold the others'.
const (
	// liveParallel is how many calls a channel makes at once.
	liveParallel = 16
	// liveQueued is how many live messages a chat keeps waiting; past it
	// the oldest is dropped: they are previews, and a stale one is noise.
	liveQueued = 32
)

// followLive subscribes la to its channel's live messages and flushes the
// subscription to the server, so that it is followed once followLive
// returns. A queue group: with several gateways, each live message is
// shown once, not once per gateway. Unsubscribe waits for the deliveries
// under way, which end with ctx.
func (g *Gateway) followLive(ctx context.Context, channel string, la LiveAdapter) (unsubscribe func(), err error) {
	q := &liveQueue{
		deliver: func(out *nanofleetv1.OutboundMessage) {
			if err := la.DeliverLive(ctx, out); err != nil {
				g.log.Debug("live delivery failed", "channel", channel, "err", err)
			}
		},
		slots: make(chan struct{}, liveParallel),
		chats: map[string][]*nanofleetv1.OutboundMessage{},
	}
	sub, err := g.bus.NC.QueueSubscribe(g.bus.Space.LiveChannel(channel), g.bus.Space.GatewayConsumer(channel), func(m *nats.Msg) {
		out := &nanofleetv1.OutboundMessage{}
		if err := proto.Unmarshal(m.Data, out); err != nil {
			g.log.Warn("drop malformed live message", "subject", m.Subject, "err", err)
			return
		}
		if dropped := q.add(out); dropped {
			g.log.Debug("live message dropped: the chat's queue is full", "channel", channel, "chat", out.GetChatId())
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe live %s: %w", channel, err)
	}
	unsubscribe = func() {
		_ = sub.Unsubscribe()
		q.close()
	}
	if err := g.setUp(ctx, g.bus.NC.FlushWithContext); err != nil {
		unsubscribe()
		return nil, fmt.Errorf("subscribe live %s: %w", channel, err)
	}
	return unsubscribe, nil
}

// liveQueue delivers live messages in order within a chat and
// concurrently across chats, at most cap(slots) at once.
type liveQueue struct {
	deliver func(*nanofleetv1.OutboundMessage)
	slots   chan struct{}
	wg      sync.WaitGroup

	mu sync.Mutex
	// chats holds, for each chat with a delivery under way, what waits
	// behind it.
	chats  map[string][]*nanofleetv1.OutboundMessage
	closed bool
}

// close drops what comes from now on and waits for the deliveries under
// way (a callback may still run after the unsubscribe).
func (q *liveQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wg.Wait()
}

// add queues out behind its chat's earlier live messages, and reports
// whether it dropped the oldest of them to make room.
func (q *liveQueue) add(out *nanofleetv1.OutboundMessage) (dropped bool) {
	chat := out.GetChatId()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	if waiting, busy := q.chats[chat]; busy {
		if n := len(waiting); n > 0 && isDelta(out) && isDelta(waiting[n-1]) {
			// Adapters show a waiting delta only as "the turn runs"
			// (the edit streams follow deltas themselves): the latest
			// will do, and a stream of them cannot crowd out a hint.
			waiting[n-1] = out
			return false
		}
		if dropped = len(waiting) == liveQueued; dropped {
			waiting = waiting[1:]
		}
		q.chats[chat] = append(waiting, out)
		return dropped
	}
	q.chats[chat] = nil
	q.wg.Go(func() { q.run(chat, out) })
	return false
}

// run delivers out, then what its chat queued meanwhile, and ends when
// the chat has nothing left.
func (q *liveQueue) run(chat string, out *nanofleetv1.OutboundMessage) {
	for {
		q.slots <- struct{}{}
		q.deliver(out)
		<-q.slots
		q.mu.Lock()
		waiting := q.chats[chat]
		if len(waiting) == 0 {
			delete(q.chats, chat)
			q.mu.Unlock()
			return
		}
		out, q.chats[chat] = waiting[0], waiting[1:]
		q.mu.Unlock()
	}
}

func isDelta(out *nanofleetv1.OutboundMessage) bool {
	return out.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA
}
