package dingtalk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/textcut"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// Deliver sends one durable reply as markdown, split, continuing after
// the pieces an earlier attempt already sent, on this gateway or another
// (internal/parts): through the message's session webhook while it is
// valid, else (expired, or refused) through the robot send API.
func (a *Adapter) Deliver(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	pieces := markup.Split(msg.GetContent(), Limit)
	start, err := a.streams.Start(ctx, msg, len(pieces), a.sent) // the streamed card may hold the first piece
	if err != nil {
		return err
	}
	return a.sent.SendReply(ctx, msg.GetId(), start, pieces, msg.GetMedia(),
		func(ctx context.Context, _ int, piece string) error {
			return a.send(ctx, msg, "markdown", piece)
		},
		func(ctx context.Context, _ int, m *nanofleetv1.MediaRef) error {
			return a.sendMedia(ctx, msg, m)
		})
}

// DeliverLive sends progress and tool hints as text when enabled, cut to
// one message of at most [Limit]: a preview split in several would be
// noise, and the model's text is not bounded.
func (a *Adapter) DeliverLive(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	if !a.cfg.ShowsLive(msg.GetKind(), a.deps.SendProgress, a.deps.SendToolHints) {
		return nil
	}
	return a.send(ctx, msg, "text", markup.Truncate(msg.GetContent(), Limit))
}

// webhookMargin is how long before its expiry a session webhook is no
// longer used, so that a send does not race the expiry.
const webhookMargin = 30 * time.Second

// send delivers one message of kind "markdown" or "text".
func (a *Adapter) send(ctx context.Context, msg *nanofleetv1.OutboundMessage, kind, md string) error {
	meta := msg.GetMetadata()
	if hook := meta["session_webhook"]; hook != "" {
		ms, _ := strconv.ParseInt(meta["session_webhook_expires"], 10, 64)
		if a.now().Add(webhookMargin).Before(time.UnixMilli(ms)) {
			err := a.webhook(ctx, hook, kind, md)
			if retry, _ := gateway.Retryable(err); err == nil || retry {
				return err
			}
			a.log.Info("session webhook refused, sending through the robot API", "err", err)
		}
	}
	return a.robot(ctx, msg.GetChatId(), kind, md)
}

// webhook posts to a message's session webhook.
func (a *Adapter) webhook(ctx context.Context, hook, kind, md string) error {
	var body map[string]any
	if kind == "text" {
		body = map[string]any{"msgtype": "text", "text": map[string]string{"content": md}}
	} else {
		body = map[string]any{"msgtype": "markdown", "markdown": map[string]string{"title": title(md), "text": md}}
	}
	data, _ := json.Marshal(body) // maps of strings always encode
	resp, raw, err := a.post(ctx, "session webhook", hook, "application/json", bytes.NewReader(data), nil)
	if err != nil {
		return err
	}
	var out oapiAnswer
	_ = json.Unmarshal(raw, &out)
	if resp.StatusCode == http.StatusOK && out.ErrCode == 0 {
		return nil
	}
	e := fmt.Errorf("dingtalk: session webhook: HTTP %d, errcode %d: %s", resp.StatusCode, out.ErrCode, out.ErrMsg)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || out.ErrCode == errSendTooFast:
		return gateway.Retry(e, max(retryAfter(resp.Header), sendTooFastWait))
	case resp.StatusCode >= 500:
		return gateway.Retry(e, 0)
	}
	return gateway.Permanent(e)
}

// robot sends through the robot API: to a group by its conversation id,
// to a user by staff id.
func (a *Adapter) robot(ctx context.Context, chat, kind, md string) error {
	if kind == "text" {
		return a.robotSend(ctx, chat, "sampleText", map[string]string{"content": md})
	}
	return a.robotSend(ctx, chat, "sampleMarkdown", map[string]string{"title": title(md), "text": md})
}

// robotSend sends one robot message of template key with its parameters.
func (a *Adapter) robotSend(ctx context.Context, chat, key string, param map[string]string) error {
	p, _ := json.Marshal(param) // maps of strings always encode
	body := map[string]any{"robotCode": a.cfg.robotCode(), "msgKey": key, "msgParam": string(p)}
	path := "/v1.0/robot/oToMessages/batchSend"
	if strings.HasPrefix(chat, "cid") {
		path, body["openConversationId"] = "/v1.0/robot/groupMessages/send", chat
	} else {
		body["userIds"] = []string{chat}
	}
	var out struct {
		FlowControlled []string `json:"flowControlledStaffIdList"`
		Invalid        []string `json:"invalidStaffIdList"`
	}
	if err := a.call(ctx, path, body, &out); err != nil {
		return err
	}
	switch {
	case len(out.FlowControlled) > 0:
		return gateway.Retry(fmt.Errorf("dingtalk: robot send to %s flow-controlled", chat), sendTooFastWait)
	case len(out.Invalid) > 0:
		return gateway.Permanent(fmt.Errorf("dingtalk: robot send: invalid staff id %s", chat))
	}
	return nil
}

// title is a markdown message's notification title: its first line as
// plain text, at most 20 characters.
func title(md string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(markup.Plain(md)), "\n")
	if line = textcut.Runes(strings.TrimSpace(line), 20); line == "" {
		line = "reply"
	}
	return line
}
