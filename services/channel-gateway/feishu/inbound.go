package feishu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/nanofleet/nanofleet/pkg/metakey"
	"github.com/nanofleet/nanofleet/pkg/observe"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
)

// handleEvent decodes one event payload (plain JSON) and handles it. Only
// a failure to publish is returned; anything malformed is logged and
// dropped.
func (a *Adapter) handleEvent(ctx context.Context, in gateway.Inbox, payload []byte) error {
	var ev larkim.P2MessageReceiveV1
	if err := json.Unmarshal(payload, &ev); err != nil {
		a.log.Warn("dropping malformed Feishu event", "err", err, "raw", observe.Excerpt(payload))
		return nil
	}
	if ev.EventV2Base == nil || ev.EventV2Base.Header == nil {
		a.log.Warn("dropping Feishu event without a header", "raw", observe.Excerpt(payload))
		return nil
	}
	if ev.EventV2Base.Header.EventType != "im.message.receive_v1" {
		a.log.Debug("ignoring Feishu event", "type", ev.EventV2Base.Header.EventType)
		return nil
	}
	if err := a.onMessage(ctx, in, ev.EventV2Base.Header.EventID, ev.Event); err != nil {
		return fmt.Errorf("%w: %w", errPublish, err)
	}
	return nil
}

// onMessage applies the policies to one received message and publishes
// it.
func (a *Adapter) onMessage(ctx context.Context, in gateway.Inbox, eventID string, ev *larkim.P2MessageReceiveV1Data) error {
	if ev == nil || ev.Message == nil || ev.Sender == nil || ev.Sender.SenderId == nil || eventID == "" {
		a.log.Warn("dropping Feishu message event without message, sender or id", "event_id", eventID)
		return nil
	}
	m, sender := ev.Message, ev.Sender
	chat, msgID, chatType := str(m.ChatId), str(m.MessageId), str(m.ChatType)
	user := str(sender.SenderId.OpenId)
	if chat == "" || msgID == "" || user == "" {
		a.log.Warn("dropping Feishu message without chat, message or sender id", "event_id", eventID)
		return nil
	}
	if str(sender.SenderType) == "app" || user == a.bot() {
		return nil
	}
	dm := chatType == "p2p"
	mentioned := false
	text, files := a.content(str(m.MessageType), str(m.Content))
	for _, mn := range m.Mentions {
		key := str(mn.Key)
		if mn.Id != nil && str(mn.Id.OpenId) == a.bot() && a.bot() != "" {
			mentioned = true
			text = strings.ReplaceAll(text, key, "")
		} else if key != "" {
			text = strings.ReplaceAll(text, key, "@"+str(mn.Name))
		}
	}
	text = strings.TrimSpace(text)
	if !dm && !a.cfg.AdmitsGroup(mentioned, chat) {
		return nil
	}
	ok, err := a.deps.Gate.Admit(ctx, a.log, a.policy, access.Sender{
		ID: user, Aliases: []string{str(sender.SenderId.UserId), str(sender.SenderId.UnionId)}, ChatID: chat, DM: dm,
	}, text)
	if err != nil {
		return fmt.Errorf("access check: %w", err)
	}
	if !ok {
		return nil
	}
	msg := &nanofleetv1.InboundMessage{
		Id: eventID, Channel: Channel, ChatId: chat, SenderId: user, Content: text,
		Metadata: map[string]string{"message_id": msgID, "chat_type": chatType},
	}
	if t := str(m.ThreadId); t != "" {
		msg.Metadata["thread_id"] = t
	}
	if a.cfg.Streaming {
		msg.Metadata[metakey.Stream] = "true" // asks the worker for deltas
	}
	if !media.AttachAll(ctx, a.log, msg, files, func(ctx context.Context, i int, f resource) (*nanofleetv1.MediaRef, error) {
		return a.download(ctx, msgID, eventID, i, f)
	}) {
		return nil
	}
	return in.Publish(ctx, msg)
}

// resource is an image or file a message carries.
type resource struct {
	key, kind string // kind is "image" or "file", as the resource API takes it
	name      string
}

func (r resource) FileName() string { return r.name }

// content turns a message's content JSON into text and the resources to
// download. Unknown types become a short note rather than nothing.
func (a *Adapter) content(msgType, raw string) (string, []resource) {
	var c struct {
		Text     string `json:"text"`
		ImageKey string `json:"image_key"`
		FileKey  string `json:"file_key"`
		FileName string `json:"file_name"`
		Title    string `json:"title"`
		Content  [][]struct {
			Tag      string `json:"tag"`
			Text     string `json:"text"`
			Href     string `json:"href"`
			ImageKey string `json:"image_key"`
			UserName string `json:"user_name"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		a.log.Warn("malformed Feishu message content", "type", msgType, "err", err, "raw", observe.Excerpt([]byte(raw)))
		return "", nil
	}
	switch msgType {
	case "text":
		return c.Text, nil
	case "image":
		return "", []resource{{key: c.ImageKey, kind: "image", name: c.ImageKey}}
	case "file", "audio", "media":
		name := c.FileName
		if name == "" {
			name = c.FileKey
			if msgType == "audio" {
				name += ".opus"
			}
		}
		return "", []resource{{key: c.FileKey, kind: "file", name: name}}
	case "post":
		var b strings.Builder
		var files []resource
		if c.Title != "" {
			b.WriteString(c.Title + "\n")
		}
		for _, line := range c.Content {
			for _, el := range line {
				switch el.Tag {
				case "text", "md":
					b.WriteString(el.Text)
				case "a":
					fmt.Fprintf(&b, "[%s](%s)", el.Text, el.Href)
				case "at":
					b.WriteString("@" + el.UserName)
				case "img":
					files = append(files, resource{key: el.ImageKey, kind: "image", name: el.ImageKey})
				}
			}
			b.WriteString("\n")
		}
		return b.String(), files
	}
	return "[" + msgType + " message]", nil
}

// download copies a message's resource into the object store.
func (a *Adapter) download(ctx context.Context, msgID, eventID string, i int, f resource) (*nanofleetv1.MediaRef, error) {
	if f.key == "" {
		return nil, errors.New("no resource key")
	}
	resp, err := a.im.MessageResource.Get(ctx, larkim.NewGetMessageResourceReqBuilder().
		MessageId(msgID).FileKey(f.key).Type(f.kind).Build())
	if err != nil {
		return nil, err
	}
	if !resp.Success() || resp.File == nil {
		return nil, fmt.Errorf("resource %s: HTTP %d, code %d: %s", f.key, resp.StatusCode, resp.Code, resp.Msg)
	}
	// The message's own file name is the one the sender saw; images have
	// none, and their type is read from their bytes.
	name := f.name
	if name == "" {
		name = resp.FileName
	}
	object := fmt.Sprintf("feishu/%s/%d-%s", eventID, i, f.key)
	return a.media.Put(ctx, object, name, "", resp.File)
}
