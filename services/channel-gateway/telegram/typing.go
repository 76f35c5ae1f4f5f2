package telegram

import (
	"context"
	"fmt"
	"sync"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// typing keeps Telegram's "typing…" indicator on in chats whose turn is
// running. A chat's indicator starts when its message is published and
// stops when a final answer or error for it appears on the outbound
// subject (whichever gateway delivers it), or after a time limit.
type typing struct {
	a      *Adapter
	mu     sync.Mutex
	active map[string]*typer
	ctx    context.Context
}

// typer is one chat's running indicator.
type typer struct{ cancel context.CancelFunc }

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
		return nil, fmt.Errorf("telegram: watch replies: %w", err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// start turns the indicator on for chat until stopped.
func (t *typing) start(chat string, thread int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx == nil || t.active[chat] != nil {
		return
	}
	if t.active == nil {
		t.active = map[string]*typer{}
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.a.typingMax)
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
		tick := time.NewTicker(t.a.typingEvery)
		defer tick.Stop()
		for {
			_, err := t.a.bot.SendChatAction(ctx, &tgbot.SendChatActionParams{
				ChatID: chat, MessageThreadID: thread, Action: models.ChatActionTyping,
			})
			if err != nil && ctx.Err() == nil {
				t.a.log.Debug("sendChatAction failed", "chat", chat, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// stop turns the indicator off for chat.
func (t *typing) stop(chat string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tp := t.active[chat]; tp != nil {
		tp.cancel()
		delete(t.active, chat)
	}
}
