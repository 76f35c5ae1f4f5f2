package gateway

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
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
	// endedKept is how long a turn whose last reply was delivered is
	// remembered, so that its live messages arriving later are dropped.
	endedKept = time.Minute
	// endWait bounds how long a turn's last reply waits for the turn's
	// live delivery under way.
	endWait = 5 * time.Second
)

// followLive subscribes la to its channel's live messages and flushes the
// subscription to the server, so that it is followed once followLive
// returns. A queue group: with several gateways, each live message is
// shown once, not once per gateway. Unsubscribe waits for the deliveries
// under way, which end with ctx.
func (g *Gateway) followLive(ctx context.Context, channel string, la LiveAdapter) (q *liveQueue, unsubscribe func(), err error) {
	q = &liveQueue{
		deliver: func(out *nanofleetv1.OutboundMessage) {
			if err := la.DeliverLive(ctx, out); err != nil {
				g.log.Debug("live delivery failed", "channel", channel, "err", err)
			}
		},
		slots: make(chan struct{}, liveParallel),
		chats: map[string]*liveChat{},
		ended: map[turnOf]time.Time{},
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
		return nil, nil, fmt.Errorf("subscribe live %s: %w", channel, err)
	}
	unsubscribe = func() {
		_ = sub.Unsubscribe()
		q.close()
	}
	if err := g.setUp(ctx, func(ctx context.Context) error { return bus.Flush(ctx, g.bus.NC) }); err != nil {
		unsubscribe()
		return nil, nil, fmt.Errorf("subscribe live %s: %w", channel, err)
	}
	return q, unsubscribe, nil
}

// liveQueue delivers live messages in order within a chat and
// concurrently across chats, at most cap(slots) at once. A turn's live
// messages never follow its last reply: [liveQueue.end] drops those still
// waiting and those that come later, and waits for one under way.
type liveQueue struct {
	deliver func(*nanofleetv1.OutboundMessage)
	slots   chan struct{}
	wg      sync.WaitGroup

	mu sync.Mutex
	// chats holds the chats with a delivery under way.
	chats map[string]*liveChat
	// ended holds the turns whose last reply was delivered, and when.
	ended  map[turnOf]time.Time
	pruned time.Time
	closed bool
}

// liveChat is a chat's delivery under way and what waits behind it.
type liveChat struct {
	waiting []*nanofleetv1.OutboundMessage
	turn    string        // of the delivery under way
	done    chan struct{} // closed when it ends
}

// turnOf names a turn within a channel.
type turnOf struct{ chat, turn string }

// close drops what comes from now on and waits for the deliveries under
// way (a callback may still run after the unsubscribe).
func (q *liveQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wg.Wait()
}

// add queues out behind its chat's earlier live messages, and reports
// whether it dropped the oldest of them to make room. A live message of
// an ended turn is dropped.
func (q *liveQueue) add(out *nanofleetv1.OutboundMessage) (dropped bool) {
	chat := out.GetChatId()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	if _, ended := q.ended[turnOf{chat, out.GetTurnId()}]; ended && out.GetTurnId() != "" {
		return false
	}
	if c, busy := q.chats[chat]; busy {
		if n := len(c.waiting); n > 0 && isDelta(out) && isDelta(c.waiting[n-1]) {
			// Adapters show a waiting delta only as "the turn runs"
			// (the edit streams follow deltas themselves): the latest
			// will do, and a stream of them cannot crowd out a hint.
			c.waiting[n-1] = out
			return false
		}
		if dropped = len(c.waiting) == liveQueued; dropped {
			c.waiting = c.waiting[1:]
		}
		c.waiting = append(c.waiting, out)
		return dropped
	}
	c := &liveChat{}
	q.chats[chat] = c
	q.wg.Go(func() { q.run(chat, c, out) })
	return false
}

// run delivers out, then what its chat queued meanwhile, and ends when
// the chat has nothing left.
func (q *liveQueue) run(chat string, c *liveChat, out *nanofleetv1.OutboundMessage) {
	for {
		q.slots <- struct{}{}
		q.mu.Lock()
		// Its turn may have ended while it waited for a slot.
		_, ended := q.ended[turnOf{chat, out.GetTurnId()}]
		c.turn, c.done = out.GetTurnId(), make(chan struct{})
		done := c.done
		q.mu.Unlock()
		if !ended || out.GetTurnId() == "" {
			q.deliver(out)
		}
		close(done)
		<-q.slots
		q.mu.Lock()
		if len(c.waiting) == 0 {
			delete(q.chats, chat)
			q.mu.Unlock()
			return
		}
		out, c.waiting = c.waiting[0], c.waiting[1:]
		q.mu.Unlock()
	}
}

// end is called before a turn's last reply is delivered: the turn's live
// messages still waiting are dropped, and so are those that come later;
// it waits (at most endWait, or until ctx ends) for the turn's live
// delivery under way, so that a tool hint is not shown after the answer.
func (q *liveQueue) end(ctx context.Context, out *nanofleetv1.OutboundMessage) {
	turn := out.GetTurnId()
	if turn == "" {
		return
	}
	chat := out.GetChatId()
	q.mu.Lock()
	now := time.Now()
	if now.Sub(q.pruned) >= time.Second {
		for k, at := range q.ended {
			if now.Sub(at) > endedKept {
				delete(q.ended, k)
			}
		}
		q.pruned = now
	}
	q.ended[turnOf{chat, turn}] = now
	var done chan struct{}
	if c, busy := q.chats[chat]; busy {
		c.waiting = slices.DeleteFunc(c.waiting, func(m *nanofleetv1.OutboundMessage) bool { return m.GetTurnId() == turn })
		if c.turn == turn {
			done = c.done
		}
	}
	q.mu.Unlock()
	if done == nil {
		return
	}
	wait := time.NewTimer(endWait)
	defer wait.Stop()
	select {
	case <-done:
	case <-wait.C:
	case <-ctx.Done():
	}
}

func isDelta(out *nanofleetv1.OutboundMessage) bool {
	return out.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA
}
