package dingtalk

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/open-dingtalk/dingtalk-stream-sdk-go/chatbot"

	"github.com/nanofleet/nanofleet/pkg/metakey"
	"github.com/nanofleet/nanofleet/pkg/observe"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
)

// content is the type-specific part of a robot message.
type content struct {
	DownloadCode        string `json:"downloadCode"`
	PictureDownloadCode string `json:"pictureDownloadCode"`
	FileName            string `json:"fileName"`
	Recognition         string `json:"recognition"`
	RichText            []struct {
		Text         string `json:"text"`
		Type         string `json:"type"`
		DownloadCode string `json:"downloadCode"`
	} `json:"richText"`
}

// file is a picture or file to download.
type file struct{ code, name string }

func (f file) FileName() string { return f.name }

// onMessage applies the policies to one robot message and publishes it.
// Only a failure to publish is returned.
func (a *Adapter) onMessage(ctx context.Context, in gateway.Inbox, raw []byte) error {
	var m chatbot.BotCallbackDataModel
	if err := json.Unmarshal(raw, &m); err != nil {
		a.log.Warn("dropping malformed DingTalk robot message", "err", err, "raw", observe.Excerpt(raw))
		return nil
	}
	dm := m.ConversationType == "1"
	if m.MsgId == "" || m.ConversationId == "" || m.SenderStaffId == "" || (!dm && m.ConversationType != "2") {
		a.log.Warn("dropping DingTalk robot message without id, conversation, sender or type", "raw", observe.Excerpt(raw))
		return nil
	}
	text, files := a.text(&m)
	if !dm && !a.cfg.AdmitsGroup(m.IsInAtList, m.ConversationId) {
		return nil
	}
	// A one-to-one chat is addressed by the user's staff id (the send API
	// takes user ids), a group by its conversation id.
	chat := m.ConversationId
	if dm {
		chat = m.SenderStaffId
	}
	ok, err := a.deps.Gate.Admit(ctx, a.log, a.policy, access.Sender{
		ID: m.SenderStaffId, Aliases: []string{m.SenderId}, Name: m.SenderNick, ChatID: chat, DM: dm,
	}, text)
	if err != nil {
		return fmt.Errorf("access check: %w", err)
	}
	if !ok {
		return nil
	}
	msg := &nanofleetv1.InboundMessage{
		Id: m.MsgId, Channel: Channel, ChatId: chat, SenderId: m.SenderStaffId, Content: text,
		// is_group tells memory a group from a private chat (memory.IsGroup).
		Metadata: map[string]string{"conversation_type": m.ConversationType, "conversation_id": m.ConversationId, metakey.IsGroup: fmt.Sprint(!dm)},
	}
	if m.SessionWebhook != "" {
		msg.Metadata["session_webhook"] = m.SessionWebhook
		msg.Metadata["session_webhook_expires"] = strconv.FormatInt(m.SessionWebhookExpiredTime, 10)
	}
	if a.streams != nil {
		msg.Metadata[metakey.Stream] = "true" // asks the worker for deltas
	}
	if !media.AttachAll(ctx, a.log, msg, files, func(ctx context.Context, i int, f file) (*nanofleetv1.MediaRef, error) {
		return a.download(ctx, m.MsgId, i, f)
	}) {
		return nil
	}
	return in.Publish(ctx, msg)
}

// text returns a message's text and the files it carries.
func (a *Adapter) text(m *chatbot.BotCallbackDataModel) (string, []file) {
	if m.Msgtype == "text" || m.Msgtype == "" {
		return strings.TrimSpace(m.Text.Content), nil
	}
	var c content
	if m.Content != nil {
		data, _ := json.Marshal(m.Content) // decoded from JSON, so it encodes
		if err := json.Unmarshal(data, &c); err != nil {
			a.log.Warn("malformed DingTalk message content", "type", m.Msgtype, "err", err)
		}
	}
	switch m.Msgtype {
	case "picture":
		return "", []file{{code: cmp.Or(c.DownloadCode, c.PictureDownloadCode), name: "picture"}}
	case "file", "video":
		return "", []file{{code: c.DownloadCode, name: cmp.Or(c.FileName, m.Msgtype)}}
	case "audio":
		return strings.TrimSpace(c.Recognition), []file{{code: c.DownloadCode, name: "voice.amr"}}
	case "richText":
		var b strings.Builder
		var files []file
		for _, el := range c.RichText {
			if el.Type == "picture" || (el.Text == "" && el.DownloadCode != "") {
				files = append(files, file{code: el.DownloadCode, name: "picture"})
				continue
			}
			b.WriteString(el.Text)
		}
		return strings.TrimSpace(b.String()), files
	}
	return "[" + m.Msgtype + " message]", nil
}

// download asks for a file's URL and copies the file into the object
// store.
func (a *Adapter) download(ctx context.Context, msgID string, i int, f file) (*nanofleetv1.MediaRef, error) {
	if f.code == "" {
		return nil, errors.New("no download code")
	}
	var out struct {
		DownloadURL string `json:"downloadUrl"`
	}
	if err := a.call(ctx, "/v1.0/robot/messageFiles/download", map[string]string{"downloadCode": f.code, "robotCode": a.cfg.robotCode()}, &out); err != nil {
		return nil, err
	}
	if out.DownloadURL == "" {
		return nil, errors.New("no download URL")
	}
	object := fmt.Sprintf("dingtalk/%s/%d", msgID, i)
	return a.media.Fetch(ctx, a.http, out.DownloadURL, nil, object, f.name, "")
}
