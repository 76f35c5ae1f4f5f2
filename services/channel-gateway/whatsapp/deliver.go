package whatsapp

import (
	"context"
	"fmt"
	"strings"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/metakey"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/typing"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// Deliver sends one durable reply as WhatsApp-formatted text, split on
// paragraph boundaries, continuing after the pieces an earlier attempt
// already sent. Only the gateway holding the connection can send: the
// others pass the reply to it over core NATS.
func (a *Adapter) Deliver(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	if c := a.current(); c != nil {
		return a.deliver(ctx, c, msg)
	}
	return a.forward(ctx, msg)
}

// DeliverLive shows "typing…" for progress (and, when enabled, sends
// progress and tool hints as text).
func (a *Adapter) DeliverLive(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	if c := a.current(); c != nil {
		return a.deliverLive(ctx, c, msg)
	}
	return a.forward(ctx, msg)
}

func (a *Adapter) deliver(ctx context.Context, c Conn, msg *nanofleetv1.OutboundMessage) error {
	chat, err := types.ParseJID(msg.GetChatId())
	if err != nil || chat.IsEmpty() {
		return gateway.Permanent(fmt.Errorf("whatsapp: chat id %q: not a JID", msg.GetChatId()))
	}
	pieces := markup.Split(msg.GetContent(), Limit)
	if strings.TrimSpace(msg.GetContent()) == "" {
		pieces = nil
	}
	start, err := a.sent.Sent(ctx, msg.GetId())
	if err != nil {
		return err
	}
	err = a.sent.SendReply(ctx, msg.GetId(), start, pieces, msg.GetMedia(),
		func(ctx context.Context, i int, piece string) error {
			if err := c.Send(ctx, chat, a.message(msg, i, markup.WhatsApp(piece))); err != nil {
				return sendError(err)
			}
			return nil
		},
		func(ctx context.Context, _ int, m *nanofleetv1.MediaRef) error {
			return a.sendMedia(ctx, c, chat, m)
		})
	if err != nil {
		return err
	}
	if typing.EndsTurn(msg) {
		if err := c.Composing(ctx, chat, false); err != nil {
			a.log.Debug("paused presence", "err", err)
		}
	}
	return nil
}

func (a *Adapter) deliverLive(ctx context.Context, c Conn, msg *nanofleetv1.OutboundMessage) error {
	chat, err := types.ParseJID(msg.GetChatId())
	if err != nil {
		return nil
	}
	send := a.cfg.ShowsLive(msg.GetKind(), a.deps.SendProgress, a.deps.SendToolHints)
	if send && strings.TrimSpace(msg.GetContent()) != "" {
		// One message of at most Limit, cut before it is rendered as an
		// answer's pieces are: the model's text is not bounded.
		text := markup.WhatsApp(markup.Truncate(msg.GetContent(), Limit))
		if err := c.Send(ctx, chat, &waE2E.Message{Conversation: proto.String(text)}); err != nil {
			return err
		}
	}
	// Any live message means the turn is still running.
	return c.Composing(ctx, chat, true)
}

// message is piece i of a reply. In groups the first piece quotes the
// message it answers, so that the answer is found among others; in a
// direct chat a quote would only add noise.
func (a *Adapter) message(msg *nanofleetv1.OutboundMessage, i int, text string) *waE2E.Message {
	meta := msg.GetMetadata()
	if i > 0 || msg.GetReplyTo() == "" || meta[metakey.IsGroup] != "true" {
		return &waE2E.Message{Conversation: proto.String(text)}
	}
	return &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
		Text: proto.String(text),
		ContextInfo: &waE2E.ContextInfo{
			StanzaID:      proto.String(msg.GetReplyTo()),
			Participant:   proto.String(meta["sender"]),
			QuotedMessage: &waE2E.Message{Conversation: proto.String(meta["quote_text"])},
		},
	}}
}
