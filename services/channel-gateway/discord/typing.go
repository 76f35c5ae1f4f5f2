package discord

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/disgoorg/disgo/rest"
	"github.com/disgoorg/snowflake/v2"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// typing keeps Discord's "typing…" indicator on in channels whose turn is
// running. Discord shows it for ten seconds or until the bot's next
// message, so it is renewed until a final answer or error for the channel
// appears on the outbound subject (whichever gateway delivers it), or a
// time limit passes.
type typing struct {
	a      *Adapter
	mu     sync.Mutex
	active map[string]context.CancelFunc
	ctx    context.Context
}

// watch starts following the channel's outbound subject; call the
// returned function to stop.
func (t *typing) watch(ctx context.Context) (func(), error) {
	t.mu.Lock()
	t.ctx = ctx
	t.mu.Unlock()
	b := t.a.deps.Bus
	sub, err := b.NC.Subscribe(b.Space.OutboundChannel(Channel), func(m *nats.Msg) {
		out := &nanofleetv1.OutboundMessage{}
		if proto.Unmarshal(m.Data, out) != nil {
			return
		}
		switch out.GetKind() {
		case nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR:
			t.stop(out.GetChatId())
		}
	})
	if err != nil {
		return nil, fmt.Errorf("discord: watch replies: %w", err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// start turns the indicator on for channel until stopped.
func (t *typing) start(channel string) {
	id, err := snowflake.Parse(channel)
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx == nil || t.active[channel] != nil {
		return
	}
	if t.active == nil {
		t.active = map[string]context.CancelFunc{}
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.a.typingMax)
	t.active[channel] = cancel
	go func() {
		defer cancel()
		tick := time.NewTicker(t.a.typingEvery)
		defer tick.Stop()
		for {
			if err := t.a.rest.SendTyping(id, rest.WithCtx(ctx)); err != nil && ctx.Err() == nil {
				t.a.log.Debug("discord typing failed", "chat", channel, "err", err)
			}
			select {
			case <-ctx.Done():
				t.mu.Lock()
				if t.active[channel] != nil && ctx.Err() == context.DeadlineExceeded {
					delete(t.active, channel)
				}
				t.mu.Unlock()
				return
			case <-tick.C:
			}
		}
	}()
}

// stop turns the indicator off for channel.
func (t *typing) stop(channel string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cancel := t.active[channel]; cancel != nil {
		cancel()
		delete(t.active, channel)
	}
}
