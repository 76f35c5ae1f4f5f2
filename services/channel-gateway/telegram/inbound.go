package telegram

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/nanofleet/nanofleet/pkg/metakey"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
)

// errMalformed marks an update that cannot be understood.
var errMalformed = errors.New("malformed update")

// decodeUpdate parses one update. It returns the update id whenever it can
// be read, also for an update that is otherwise malformed, so the poller
// can move past it.
func decodeUpdate(raw []byte) (int64, *models.Update, error) {
	var head struct {
		ID *int64 `json:"update_id"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.ID == nil {
		return 0, nil, fmt.Errorf("%w: no update_id", errMalformed)
	}
	upd := &models.Update{}
	if err := json.Unmarshal(raw, upd); err != nil {
		return *head.ID, nil, fmt.Errorf("%w: %w", errMalformed, err)
	}
	if m := upd.Message; m != nil && m.Chat.ID == 0 {
		return *head.ID, nil, fmt.Errorf("%w: message without chat", errMalformed)
	}
	return *head.ID, upd, nil
}

// handle applies the group and access policies to one update and publishes
// it. Updates that are not messages, or are dropped by a policy, are not
// errors.
func (a *Adapter) handle(ctx context.Context, in gateway.Inbox, upd *models.Update) error {
	msg := upd.Message
	if msg == nil || msg.From == nil || msg.From.IsBot {
		return nil
	}
	chat := strconv.FormatInt(msg.Chat.ID, 10)
	dm := msg.Chat.Type == models.ChatTypePrivate
	text := msg.Text
	if text == "" {
		text = msg.Caption
	}
	if !dm && !a.cfg.AdmitsGroup(a.mentioned(msg, text)) {
		a.log.Debug("group message without mention ignored", "chat", chat)
		return nil
	}
	sender := access.Sender{
		ID: strconv.FormatInt(msg.From.ID, 10), Aliases: []string{msg.From.Username},
		Name: strings.TrimSpace(msg.From.FirstName + " " + msg.From.LastName), ChatID: chat, DM: dm,
	}
	ok, err := a.deps.Gate.Admit(ctx, a.log, a.policy, sender, text)
	if err != nil {
		return fmt.Errorf("access check: %w", err)
	}
	if !ok {
		return nil
	}
	text = a.stripMention(text)
	text, refs := media.DownloadAll(ctx, a.log.With("chat", chat), a.media, text, attachments(msg), func(ctx context.Context, _ int, f attachment) (*nanofleetv1.MediaRef, error) {
		return a.fetch(ctx, upd.ID, chat, f)
	})
	if text == "" && len(refs) == 0 {
		return nil
	}
	meta := map[string]string{
		"message_id": strconv.Itoa(msg.ID),
		"chat_type":  string(msg.Chat.Type),
	}
	if msg.From.Username != "" {
		meta["username"] = msg.From.Username
	}
	if a.cfg.Streaming {
		meta[metakey.Stream] = "true" // asks the worker for deltas
	}
	if msg.MessageThreadID != 0 && msg.IsTopicMessage {
		meta["thread_id"] = strconv.Itoa(msg.MessageThreadID)
	}
	inbound := &nanofleetv1.InboundMessage{
		Id: strconv.FormatInt(upd.ID, 10), Channel: Channel, ChatId: chat,
		SenderId: sender.ID, SenderName: sender.Name, Content: text, Media: refs, Metadata: meta,
	}
	if err := in.Publish(ctx, inbound); err != nil {
		return err
	}
	a.startTyping(chat, atoi(meta["thread_id"]))
	return nil
}

// mentioned reports whether a group message addresses the bot: an
// @mention, a /command@bot, or a reply to one of the bot's messages.
func (a *Adapter) mentioned(msg *models.Message, text string) bool {
	if r := msg.ReplyToMessage; r != nil && r.From != nil && r.From.ID == a.botID() {
		return true
	}
	name := a.username()
	return name != "" && strings.Contains(strings.ToLower(text), "@"+strings.ToLower(name))
}

// stripMention removes "@botname" from the text.
func (a *Adapter) stripMention(text string) string {
	name := a.username()
	if name == "" {
		return strings.TrimSpace(text)
	}
	lower, at := lowerASCII(text), "@"+strings.ToLower(name)
	var b strings.Builder
	for {
		i := strings.Index(lower, at)
		if i < 0 {
			b.WriteString(text)
			break
		}
		b.WriteString(text[:i])
		text, lower = text[i+len(at):], lower[i+len(at):]
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// lowerASCII lowers ASCII letters only, so that an offset in the result
// is one in s: strings.ToLower changes some characters' length (İ grows,
// the Kelvin sign shrinks), and cutting s at an offset found in its
// lower case split characters. Bot usernames are ASCII.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// attachment is one file of a message.
type attachment struct {
	fileID, uniqueID, name, mime string
	size                         int64
}

func (f attachment) FileName() string { return f.name }
func (f attachment) FileSize() int64  { return f.size }

func attachments(msg *models.Message) []attachment {
	var out []attachment
	if n := len(msg.Photo); n > 0 {
		p := msg.Photo[n-1] // the largest size
		out = append(out, attachment{p.FileID, p.FileUniqueID, "photo.jpg", "image/jpeg", int64(p.FileSize)})
	}
	if v := msg.Voice; v != nil {
		out = append(out, attachment{v.FileID, v.FileUniqueID, "voice.ogg", cmp.Or(v.MimeType, "audio/ogg"), v.FileSize})
	}
	if v := msg.Audio; v != nil {
		out = append(out, attachment{v.FileID, v.FileUniqueID, cmp.Or(v.FileName, "audio"), v.MimeType, v.FileSize})
	}
	if v := msg.Video; v != nil {
		out = append(out, attachment{v.FileID, v.FileUniqueID, cmp.Or(v.FileName, "video.mp4"), v.MimeType, v.FileSize})
	}
	if v := msg.Document; v != nil {
		out = append(out, attachment{v.FileID, v.FileUniqueID, cmp.Or(v.FileName, "document"), v.MimeType, v.FileSize})
	}
	return out
}

func (a *Adapter) fetch(ctx context.Context, updateID int64, chat string, f attachment) (*nanofleetv1.MediaRef, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	file, err := a.bot.GetFile(ctx, &tgbot.GetFileParams{FileID: f.fileID})
	if err != nil {
		return nil, fmt.Errorf("getFile: %w", err)
	}
	name := f.name
	if name == "photo.jpg" && file.FilePath != "" {
		name = path.Base(file.FilePath)
	}
	object := fmt.Sprintf("telegram/%s/%d/%s", chat, updateID, cmp.Or(f.uniqueID, f.fileID))
	return a.media.Fetch(ctx, a.http, a.bot.FileDownloadLink(file), nil, object, name, f.mime)
}
