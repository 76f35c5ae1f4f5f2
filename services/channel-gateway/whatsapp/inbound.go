package whatsapp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/nanofleet/nanofleet/pkg/metakey"
	"github.com/nanofleet/nanofleet/pkg/textcut"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// quoteLen bounds the quoted text kept with an inbound message for the
// reply's quote preview.
const quoteLen = 200

// publishWait bounds the tries to store one inbound message.
const publishWait = 20 * time.Second

// attachment is a message's media to copy into the object store.
type attachment struct {
	msg        whatsmeow.DownloadableMessage
	name, mime string
	size       uint64
}

func (f attachment) FileName() string { return f.name }

// onMessage applies the policies to one message and publishes it. It
// returns false when the message is neither stored nor refused by a
// policy, so that WhatsApp gives it again.
func (a *Adapter) onMessage(ctx context.Context, in gateway.Inbox, e *events.Message) bool {
	info := e.Info
	if e.Message == nil || info.ID == "" || info.Chat.IsEmpty() || info.Sender.IsEmpty() {
		a.log.Warn("dropping malformed WhatsApp message event", "id", info.ID, "chat", info.Chat.String(), "sender", info.Sender.String())
		return true
	}
	if info.IsFromMe || info.Chat.Server == types.BroadcastServer {
		return true // our own messages (echoed from other devices) and status updates
	}
	text, ctxInfo, files := content(e.Message)
	if info.IsGroup && !a.cfg.AdmitsGroup(a.mentioned(ctxInfo), info.Chat.String()) {
		return true
	}
	sender := info.Sender.ToNonAD()
	var aliases []string
	if alt := info.SenderAlt; alt.User != "" {
		aliases = append(aliases, alt.User)
	}
	ok, err := a.deps.Gate.Admit(ctx, a.log, a.policy, access.Sender{
		ID: sender.User, Aliases: aliases, Name: info.PushName, ChatID: info.Chat.String(), DM: !info.IsGroup,
	}, text)
	if err != nil {
		a.log.Error("access check failed; WhatsApp gives the message again at the next connection", "id", info.ID, "err", err)
		return false
	}
	if !ok {
		return true
	}
	msg := &nanofleetv1.InboundMessage{
		Id: info.ID, Channel: Channel, ChatId: info.Chat.String(), SenderId: sender.User, Content: text,
		Metadata: map[string]string{
			"sender":        sender.String(),
			metakey.IsGroup: fmt.Sprint(info.IsGroup),
			"push_name":     info.PushName,
			"quote_text":    textcut.Runes(markup.Plain(text), quoteLen),
		},
	}
	if q := ctxInfo.GetStanzaID(); q != "" {
		msg.Metadata["reply_to_id"] = q
		if quoted := quotedText(ctxInfo.GetQuotedMessage()); quoted != "" {
			msg.Content = "> " + strings.ReplaceAll(quoted, "\n", "\n> ") + "\n\n" + msg.Content
		}
	}
	// The sender's client chooses the message id, and a group sees it:
	// under the chat and sender, one sender's media never replace
	// another's.
	objects := fmt.Sprintf("whatsapp/%s/%s/%s", info.Chat.String(), sender.String(), info.ID)
	if !media.AttachAll(ctx, a.log, msg, files, func(ctx context.Context, i int, f attachment) (*nanofleetv1.MediaRef, error) {
		return a.download(ctx, objects, i, f)
	}) {
		return true
	}
	// "Typing…" before the message is stored: sent after, it could
	// follow the answer's "paused" (a fleet that answers fast, a loaded
	// machine) and stay on in the chat.
	c := a.current()
	if c != nil {
		if err := c.Composing(ctx, info.Chat, true); err != nil {
			a.log.Debug("composing presence", "err", err)
		}
	}
	if err := a.publish(ctx, in, msg); err != nil {
		a.log.Error("whatsapp message not stored; WhatsApp gives it again at the next connection", "id", info.ID, "err", err)
		if c != nil {
			_ = c.Composing(ctx, info.Chat, false)
		}
		return false
	}
	return true
}

// publish stores msg, trying a transient failure again for up to
// publishWait: a message not stored is given again only at the next
// connection, which may be long in coming.
func (a *Adapter) publish(ctx context.Context, in gateway.Inbox, msg *nanofleetv1.InboundMessage) error {
	return gateway.PublishWithin(ctx, in, msg, publishWait, func(err error, wait time.Duration) {
		a.log.Warn("publish WhatsApp message, retrying", "id", msg.GetId(), "err", err, "in", wait)
	})
}

// mentioned reports whether a group message addresses the account: a
// mention of it, or a reply to one of its messages.
func (a *Adapter) mentioned(ci *waE2E.ContextInfo) bool {
	for _, m := range ci.GetMentionedJID() {
		if id, err := types.ParseJID(m); err == nil && a.isSelf(id) {
			return true
		}
	}
	if p := ci.GetParticipant(); p != "" && ci.GetStanzaID() != "" {
		id, err := types.ParseJID(p)
		return err == nil && a.isSelf(id) // a reply to one of our messages
	}
	return false
}

// content returns a message's text, its context (mentions, quote) and
// its attachments.
func content(m *waE2E.Message) (string, *waE2E.ContextInfo, []attachment) {
	switch {
	case m.GetConversation() != "":
		return strings.TrimSpace(m.GetConversation()), nil, nil
	case m.GetExtendedTextMessage() != nil:
		x := m.GetExtendedTextMessage()
		return strings.TrimSpace(x.GetText()), x.GetContextInfo(), nil
	case m.GetImageMessage() != nil:
		x := m.GetImageMessage()
		return strings.TrimSpace(x.GetCaption()), x.GetContextInfo(), []attachment{{x, "image" + ext(x.GetMimetype()), x.GetMimetype(), x.GetFileLength()}}
	case m.GetAudioMessage() != nil:
		x := m.GetAudioMessage()
		name := "audio"
		if x.GetPTT() {
			name = "voice"
		}
		return "", x.GetContextInfo(), []attachment{{x, name + ext(x.GetMimetype()), x.GetMimetype(), x.GetFileLength()}}
	case m.GetDocumentMessage() != nil:
		x := m.GetDocumentMessage()
		name := x.GetFileName()
		if name == "" {
			name = "document" + ext(x.GetMimetype())
		}
		return strings.TrimSpace(x.GetCaption()), x.GetContextInfo(), []attachment{{x, name, x.GetMimetype(), x.GetFileLength()}}
	case m.GetVideoMessage() != nil:
		x := m.GetVideoMessage()
		return strings.TrimSpace(x.GetCaption()), x.GetContextInfo(), []attachment{{x, "video" + ext(x.GetMimetype()), x.GetMimetype(), x.GetFileLength()}}
	case m.GetStickerMessage() != nil:
		x := m.GetStickerMessage()
		return "", x.GetContextInfo(), []attachment{{x, "sticker.webp", x.GetMimetype(), x.GetFileLength()}}
	}
	return "", nil, nil
}

func quotedText(m *waE2E.Message) string {
	if m == nil {
		return ""
	}
	text, _, files := content(m)
	if text == "" && len(files) > 0 {
		text = "[" + files[0].name + "]"
	}
	return textcut.Runes(text, quoteLen)
}

// ext is a file extension for the MIME types WhatsApp sends.
func ext(mime string) string {
	mime, _, _ = strings.Cut(mime, ";")
	switch mime {
	case "image/jpeg":
		return ".jpg"
	case "image/png":
		return ".png"
	case "image/webp":
		return ".webp"
	case "audio/ogg":
		return ".ogg"
	case "audio/mpeg":
		return ".mp3"
	case "audio/mp4":
		return ".m4a"
	case "video/mp4":
		return ".mp4"
	case "application/pdf":
		return ".pdf"
	}
	return ""
}

// download copies a message's i-th attachment into the object store,
// under the prefix objects.
func (a *Adapter) download(ctx context.Context, objects string, i int, f attachment) (*nanofleetv1.MediaRef, error) {
	if f.size > uint64(a.media.Limit()) {
		return nil, fmt.Errorf("%d bytes: %w", f.size, media.ErrTooLarge)
	}
	c := a.current()
	if c == nil {
		return nil, errors.New("not connected")
	}
	data, err := c.Download(ctx, f.msg)
	if err != nil {
		return nil, err
	}
	mime, _, _ := strings.Cut(f.mime, ";")
	return a.media.Put(ctx, fmt.Sprintf("%s/%d", objects, i), f.name, mime, bytes.NewReader(data))
}
