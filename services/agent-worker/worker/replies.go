package worker

import (
	"context"
	"fmt"
	"maps"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/metakey"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// reply adds a durable reply to the origin chat.
func (t *turn) reply(kind nanofleetv1.OutboundKind, text string) {
	out := t.outbound(kind, t.in.GetChannel(), t.in.GetChatId(), text)
	if kind == nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL && t.state.wasStreamed() {
		out.Metadata = maps.Clone(out.Metadata) // the inbound's own map
		if out.Metadata == nil {
			out.Metadata = map[string]string{}
		}
		out.Metadata[metakey.Streamed] = "true"
	}
	t.state.add(out, false)
}

func (t *turn) outbound(kind nanofleetv1.OutboundKind, channel, chatID, text string) *nanofleetv1.OutboundMessage {
	out := &nanofleetv1.OutboundMessage{
		Channel: channel, ChatId: chatID, Content: text, Kind: kind,
		ReplyTo: t.in.GetId(), SessionKey: t.key, TurnId: t.id, CreatedAt: timestamppb.Now(),
	}
	if channel == t.in.GetChannel() && chatID == t.in.GetChatId() && len(t.in.GetMetadata()) > 0 {
		out.Metadata = t.in.GetMetadata()
	}
	return out
}

// live publishes progress, a tool hint or a delta on core NATS: shown if
// someone listens, never stored.
func (t *turn) live(kind nanofleetv1.OutboundKind, text string) {
	out := t.outbound(kind, t.in.GetChannel(), t.in.GetChatId(), text)
	data, err := proto.Marshal(out)
	if err != nil {
		return
	}
	_ = t.w.d.Bus.NC.Publish(t.w.d.Bus.Space.Live(out.GetChannel(), out.GetChatId()), data)
}

// publish puts durable replies on the outbound stream, each with its id
// as Nats-Msg-Id so that a republished reply is deduplicated, and sent
// again by [bus.PublishMsg] when its ack does not come: a reply lost with
// a node that shut down waited out 10 s and failed the commit, and went
// out with the turn's redelivery.
func (t *turn) publish(ctx context.Context, replies []*nanofleetv1.OutboundMessage) error {
	for _, r := range replies {
		data, err := proto.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode reply: %w", err)
		}
		m := nats.NewMsg(t.w.d.Bus.Space.Outbound(r.GetChannel(), r.GetChatId()))
		m.Data = data
		m.Header.Set(nats.MsgIdHdr, r.GetId())
		if _, err := bus.PublishMsg(ctx, t.w.d.Bus.JS, m); err != nil {
			return fmt.Errorf("publish reply %s: %w", r.GetId(), err)
		}
	}
	return nil
}
