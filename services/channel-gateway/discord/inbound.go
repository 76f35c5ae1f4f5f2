package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/nanofleet/nanofleet/pkg/metakey"
	"github.com/nanofleet/nanofleet/pkg/observe"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
)

// errMalformed marks a MESSAGE_CREATE that cannot be understood.
var errMalformed = errors.New("malformed MESSAGE_CREATE")

// message is the part of a MESSAGE_CREATE the adapter reads. It is
// decoded from the raw payload rather than taken from disgo's typed
// event, so that the adapter decides itself what is malformed.
type message struct {
	ID        string `json:"id"`
	ChannelID string `json:"channel_id"`
	GuildID   string `json:"guild_id"`
	Type      int    `json:"type"`
	Content   string `json:"content"`
	WebhookID string `json:"webhook_id"`
	Author    struct {
		ID         string `json:"id"`
		Username   string `json:"username"`
		GlobalName string `json:"global_name"`
		Bot        bool   `json:"bot"`
	} `json:"author"`
	Mentions []struct {
		ID string `json:"id"`
	} `json:"mentions"`
	ReferencedMessage *struct {
		Author struct {
			ID string `json:"id"`
		} `json:"author"`
	} `json:"referenced_message"`
	Attachments []attachment `json:"attachments"`
}

// attachment is one file of a message.
type attachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	URL         string `json:"url"`
	Size        int64  `json:"size"`
}

func (f attachment) FileName() string { return f.Filename }
func (f attachment) FileSize() int64  { return f.Size }

// Message types answered: a plain message and a reply.
const (
	typeDefault = 0
	typeReply   = 19
)

func decodeMessage(raw []byte) (*message, error) {
	m := &message{}
	if err := json.Unmarshal(raw, m); err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformed, err)
	}
	if m.ID == "" || m.ChannelID == "" || m.Author.ID == "" {
		return nil, fmt.Errorf("%w: no id, channel_id or author", errMalformed)
	}
	return m, nil
}

// handle applies the group and access policies to one message and
// publishes it. Messages dropped by a policy are not errors; an error
// means the message could not be published and should be seen again.
func (a *Adapter) handle(ctx context.Context, in gateway.Inbox, raw []byte) error {
	m, err := decodeMessage(raw)
	if err != nil {
		a.log.Warn("dropping malformed Discord message", "err", err, "raw", observe.Excerpt(raw))
		return nil
	}
	bot := a.bot()
	if m.Author.Bot || m.WebhookID != "" || m.Author.ID == bot || (m.Type != typeDefault && m.Type != typeReply) {
		return nil // bots, webhooks, ourselves, joins and pins
	}
	dm := m.GuildID == ""
	if !dm && !a.cfg.AdmitsGroup(a.mentioned(m, bot), m.ChannelID, m.GuildID) {
		a.log.Debug("guild message not admitted by groupPolicy", "chat", m.ChannelID)
		return nil
	}
	name := m.Author.GlobalName
	if name == "" {
		name = m.Author.Username
	}
	// A user name may be all digits, as ids are: such a name could pose
	// as another user's id in allowFrom, so it is no alias.
	var aliases []string
	if strings.Trim(m.Author.Username, "0123456789") != "" {
		aliases = []string{m.Author.Username}
	}
	sender := access.Sender{ID: m.Author.ID, Aliases: aliases, Name: name, ChatID: m.ChannelID, DM: dm}
	text := stripMention(m.Content, bot)
	ok, err := a.deps.Gate.Admit(ctx, a.log, a.policy, sender, text)
	if err != nil {
		return fmt.Errorf("access check: %w", err)
	}
	if !ok {
		return nil
	}
	// An attachment without a URL is skipped, without a note.
	files := slices.DeleteFunc(m.Attachments, func(f attachment) bool { return f.URL == "" })
	text, refs := media.DownloadAll(ctx, a.log.With("chat", m.ChannelID), a.media, text, files, func(ctx context.Context, _ int, f attachment) (*nanofleetv1.MediaRef, error) {
		return a.download(ctx, m, f)
	})
	if text == "" && len(refs) == 0 {
		return nil
	}
	// is_group tells memory a guild channel from a DM (memory.IsGroup).
	meta := map[string]string{"message_id": m.ID, "username": m.Author.Username, metakey.IsGroup: fmt.Sprint(!dm)}
	if !dm {
		meta["guild_id"] = m.GuildID
	}
	if a.cfg.Streaming {
		meta[metakey.Stream] = "true" // asks the worker for deltas
	}
	msg := &nanofleetv1.InboundMessage{
		Id: m.ID, Channel: Channel, ChatId: m.ChannelID,
		SenderId: m.Author.ID, SenderName: name, Content: text, Media: refs, Metadata: meta,
	}
	if err := in.Publish(ctx, msg); err != nil {
		return err
	}
	a.startTyping(m.ChannelID)
	return nil
}

// mentioned reports whether a guild message addresses the bot: a
// mention, or a reply to one of its messages.
func (a *Adapter) mentioned(m *message, bot string) bool {
	if bot == "" {
		return false
	}
	if r := m.ReferencedMessage; r != nil && r.Author.ID == bot {
		return true
	}
	for _, u := range m.Mentions {
		if u.ID == bot {
			return true
		}
	}
	return strings.Contains(m.Content, "<@"+bot+">") || strings.Contains(m.Content, "<@!"+bot+">")
}

var spaces = regexp.MustCompile(`[ \t]+`)

// stripMention removes the bot's <@id> and <@!id> mentions from text.
func stripMention(text, bot string) string {
	if bot != "" {
		text = strings.NewReplacer("<@"+bot+">", "", "<@!"+bot+">", "").Replace(text)
	}
	return strings.TrimSpace(spaces.ReplaceAllString(text, " "))
}

// download copies an attachment of m into the object store.
func (a *Adapter) download(ctx context.Context, m *message, f attachment) (*nanofleetv1.MediaRef, error) {
	object := fmt.Sprintf("discord/%s/%s/%s", m.ChannelID, m.ID, f.ID)
	return a.media.Fetch(ctx, a.http, f.URL, nil, object, f.Filename, f.ContentType)
}
