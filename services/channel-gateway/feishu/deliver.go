package feishu

import (
	"context"
	"encoding/json"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// Deliver sends one durable reply, split and rendered, continuing after
// the pieces an earlier attempt already sent. Each piece carries a uuid
// derived from the reply id, so the platform itself drops a piece sent
// twice (after a lost answer) within the hour.
func (a *Adapter) Deliver(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	pieces := markup.SplitRendered(msg.GetContent(), Limit, maxBody(FormatCard), a.size)
	start, err := a.streams.Start(ctx, msg, len(pieces), a.sent) // the streamed card may hold the first piece
	if err != nil {
		return err
	}
	// Attachments are pieces after the text, and their uuids follow on.
	return a.sent.SendReply(ctx, msg.GetId(), start, pieces, msg.GetMedia(),
		func(ctx context.Context, i int, piece string) error {
			return a.send(ctx, msg, a.cfg.ReplyFormat, piece, pieceID(msg.GetId(), i))
		},
		func(ctx context.Context, i int, m *nanofleetv1.MediaRef) error {
			return a.sendMedia(ctx, msg, m, pieceID(msg.GetId(), len(pieces)+i))
		})
}

// DeliverLive sends progress and tool hints as text when enabled.
func (a *Adapter) DeliverLive(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	if !a.cfg.ShowsLive(msg.GetKind(), a.deps.SendProgress, a.deps.SendToolHints) {
		return nil
	}
	return a.send(ctx, msg, FormatText, markup.TruncateRendered(msg.GetContent(), maxBody(FormatText), requestBytes(FormatText)), "")
}

// pieceID is the idempotency uuid of piece i of reply id (at most 50
// characters, as the API allows).
func pieceID(id string, i int) string { return parts.PieceKey(id, i)[:32] }

// maxBody is the most requestBytes may be for a message of format: the
// platform takes a request body of 150 KB for text, 30 KB for a post or
// card (code 230025 beyond;
// https://open.feishu.cn/document/server-docs/im-v1/message/create), and
// 1 KB is left for the request's other fields.
func maxBody(format string) int {
	if format == FormatText {
		return 150<<10 - 1<<10
	}
	return 30<<10 - 1<<10
}

// requestBytes measures md as a message of format in a request: its
// content JSON as a JSON string, where escaping can make it several times
// longer than md (json.Marshal writes < as \u003c, which the request
// writes as \\u003c).
func requestBytes(format string) func(md string) int {
	return func(md string) int {
		_, content := body(format, md)
		data, _ := json.Marshal(content) // a string always encodes
		return len(data)
	}
}

// measure returns how a piece of an answer is measured against
// maxBody(FormatCard): as a message of format, scaled to the card's limit,
// and, when streamed, also as the card the stream shows the first piece in,
// so that the stream and the reply cut the answer alike.
func measure(format string, streamed bool) func(md string) int {
	msg, card := requestBytes(format), requestBytes(FormatCard)
	return func(md string) int {
		n := msg(md) * maxBody(FormatCard) / maxBody(format)
		if streamed {
			n = max(n, card(md))
		}
		return n
	}
}

// body renders Markdown as a message of format: its msg_type and content.
func body(format, md string) (string, string) {
	var v any
	switch format {
	case FormatText:
		v = map[string]string{"text": markup.Plain(md)}
	case FormatPost:
		v = map[string]any{"zh_cn": map[string]any{"content": [][]map[string]string{{{"tag": "md", "text": md}}}}}
	default:
		format = "interactive"
		v = map[string]any{
			"config":   map[string]any{"wide_screen_mode": true, "update_multi": true},
			"elements": []map[string]string{{"tag": "markdown", "content": md}},
		}
	}
	data, _ := json.Marshal(v) // maps of strings always encode
	return format, string(data)
}

// send posts one message: a reply to the asking message when the reply
// carries its message_id, else a new message in the chat.
func (a *Adapter) send(ctx context.Context, msg *nanofleetv1.OutboundMessage, format, md, uuid string) error {
	_, err := a.sendID(ctx, msg, format, md, uuid)
	return err
}

// sendID is send returning the new message's id.
func (a *Adapter) sendID(ctx context.Context, msg *nanofleetv1.OutboundMessage, format, md, uuid string) (string, error) {
	msgType, content := body(format, md)
	return a.post(ctx, msg, msgType, content, uuid)
}

// post sends one message of msgType with its content JSON, as send does,
// and returns the new message's id.
func (a *Adapter) post(ctx context.Context, msg *nanofleetv1.OutboundMessage, msgType, content, uuid string) (string, error) {
	var resp *larkcore.ApiResp
	var code int
	var text, id string
	var err error
	if parent := msg.GetMetadata()["message_id"]; parent != "" {
		b := larkim.NewReplyMessageReqBodyBuilder().MsgType(msgType).Content(content)
		if uuid != "" {
			b = b.Uuid(uuid)
		}
		var r *larkim.ReplyMessageResp
		r, err = a.im.Message.Reply(ctx, larkim.NewReplyMessageReqBuilder().MessageId(parent).Body(b.Build()).Build())
		if r != nil {
			resp, code, text = r.ApiResp, r.Code, r.Msg
			if r.Data != nil {
				id = str(r.Data.MessageId)
			}
		}
	} else {
		b := larkim.NewCreateMessageReqBodyBuilder().ReceiveId(msg.GetChatId()).MsgType(msgType).Content(content)
		if uuid != "" {
			b = b.Uuid(uuid)
		}
		var r *larkim.CreateMessageResp
		r, err = a.im.Message.Create(ctx, larkim.NewCreateMessageReqBuilder().ReceiveIdType("chat_id").Body(b.Build()).Build())
		if r != nil {
			resp, code, text = r.ApiResp, r.Code, r.Msg
			if r.Data != nil {
				id = str(r.Data.MessageId)
			}
		}
	}
	return id, classify(resp, code, text, err)
}
