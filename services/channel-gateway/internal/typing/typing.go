// Package typing keeps a platform's "typing…" indicator on in the chats
// whose turn is running. Platforms show the indicator for a few seconds
// (Telegram five, Discord ten) or until the bot's next message, so it is
// renewed until a final answer or error for the chat appears on the
// channel's outbound subject (whichever gateway delivers it), or a time
// limit passes.
package typing

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Indicator runs one renewal loop per chat. Start has no effect before
// Watch is called or after its context ends.
type Indicator struct {
	bus     *bus.Bus
	channel string
	every   time.Duration
	most    time.Duration
	log     *slog.Logger

	mu     sync.Mutex
	ctx    context.Context // Watch's
	active map[string]*typer
}

// typer is one chat's running loop.
type typer struct{ cancel context.CancelFunc }

// Option changes an optional setting of [New].
type Option func(*Indicator)

// WithLogger sets the indicator's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(t *Indicator) { t.log = observe.OrDiscard(l) } }

// CheckTiming reports an error unless an indicator can be renewed every
// every for at most most: the renewal needs a positive interval, and a
// limit shorter than it would never renew. Adapters that let tests tune
// the timing check it here, so that all refuse the same values.
func CheckTiming(every, most time.Duration) error {
	if every <= 0 || most < every {
		return fmt.Errorf("typing every %s for at most %s", every, most)
	}
	return nil
}

// New returns an indicator for the channel's chats, renewed every every
// for at most most, which [CheckTiming] accepts.
func New(b *bus.Bus, channel string, every, most time.Duration, opts ...Option) *Indicator {
	t := &Indicator{bus: b, channel: channel, every: every, most: most, log: slog.New(slog.DiscardHandler), active: map[string]*typer{}}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Watch follows the channel's outbound subject to stop a chat's indicator
// when its turn ends, and lets loops run until ctx ends; call the returned
// function to stop following.
func (t *Indicator) Watch(ctx context.Context) (func(), error) {
	t.mu.Lock()
	t.ctx = ctx
	t.mu.Unlock()
	sub, err := t.bus.NC.Subscribe(t.bus.Space.OutboundChannel(t.channel), func(m *nats.Msg) {
		out := &nanofleetv1.OutboundMessage{}
		if proto.Unmarshal(m.Data, out) != nil {
			return
		}
		t.StopIfEnded(out)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: watch replies: %w", t.channel, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// Start turns the indicator on for chat until stopped, calling send (the
// platform's typing action) now and at every renewal. A chat already
// typing keeps its loop.
func (t *Indicator) Start(chat string, send func(context.Context) error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx == nil || t.active[chat] != nil {
		return
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.most)
	me := &typer{cancel: cancel}
	t.active[chat] = me
	go func() {
		defer func() {
			cancel()
			t.mu.Lock()
			if t.active[chat] == me {
				delete(t.active, chat)
			}
			t.mu.Unlock()
		}()
		tick := time.NewTicker(t.every)
		defer tick.Stop()
		for {
			if err := send(ctx); err != nil && ctx.Err() == nil {
				t.log.Debug("typing indicator failed", "chat", chat, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// StopIfEnded turns the indicator off for msg's chat when msg ends its
// turn (see [EndsTurn]): Watch calls it on every reply the channel sends,
// and an adapter as it starts delivering one.
func (t *Indicator) StopIfEnded(msg *nanofleetv1.OutboundMessage) {
	if EndsTurn(msg) {
		t.Stop(msg.GetChatId())
	}
}

// EndsTurn reports whether msg ends its turn, so that its chat stops
// showing the bot typing: a final answer, an error, or the turn's last
// reply (the message tool's answer, after which no final follows).
func EndsTurn(msg *nanofleetv1.OutboundMessage) bool {
	switch msg.GetKind() {
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR:
		return true
	}
	return msg.GetLastOfTurn()
}

// Stop turns the indicator off for chat.
func (t *Indicator) Stop(chat string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tp := t.active[chat]; tp != nil {
		tp.cancel()
		delete(t.active, chat)
	}
}
