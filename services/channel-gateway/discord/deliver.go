package discord

import (
	"context"
	"fmt"
	"strings"

	"github.com/disgoorg/disgo/discord"
	"github.com/disgoorg/disgo/rest"
	"github.com/disgoorg/snowflake/v2"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// Deliver sends one durable reply, split at 2000 characters, then its
// attachments, continuing after the pieces an earlier attempt already
// sent. A streamed answer's first piece replaces the streamed message's
// text.
func (a *Adapter) Deliver(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	a.typing.StopIfEnded(msg)
	pieces := markup.Split(msg.GetContent(), Limit)
	start, err := a.streams.Start(ctx, msg, len(pieces), a.sent)
	if err != nil {
		return err
	}
	err = a.sent.SendReply(ctx, msg.GetId(), start, pieces, msg.GetMedia(),
		func(ctx context.Context, i int, piece string) error {
			_, err := a.post(ctx, msg, piece, i == 0, nonce(msg.GetId(), i), nil)
			return err
		},
		func(ctx context.Context, i int, m *nanofleetv1.MediaRef) error {
			return a.attach(ctx, msg, i, m)
		})
	if err != nil {
		return classify(err)
	}
	return nil
}

// DeliverLive shows progress and tool hints as separate messages when
// enabled; deltas are followed by the streams themselves (see
// internal/editstream).
func (a *Adapter) DeliverLive(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	text, ok := a.cfg.LiveText(msg, a.deps.SendProgress, a.deps.SendToolHints, italic, hint)
	if !ok {
		return nil
	}
	_, err := a.post(ctx, msg, text, false, "", nil)
	if err == nil {
		a.startTyping(msg.GetChatId()) // Discord ends the indicator with a message
	}
	return err
}

// hint shows a tool hint as code within Limit, its backticks made quotes
// so that none ends the code span.
func hint(s string) string {
	return "`" + strings.ReplaceAll(markup.Truncate(s, Limit-2), "`", "'") + "`"
}

// italic shows progress text in italics within Limit. Its backslashes and
// asterisks are escaped, so that none ends the italics early, and only
// then cut, as escaping doubles them (1,998 asterisks cut first became
// 3,996 characters, which Discord refuses). The cut never parts a
// backslash from what it escapes, which would escape the closing asterisk.
func italic(s string) string {
	esc := strings.NewReplacer(`\`, `\\`, "*", `\*`).Replace(s)
	cut := markup.Truncate(esc, Limit-2) // UTF-16 units, never fewer than Discord's code points
	if cut != esc {
		// Every backslash of esc opens a pair: an odd run of them before
		// the ellipsis is a pair cut in two.
		body := strings.TrimSuffix(cut, "…")
		if n := len(body) - len(strings.TrimRight(body, `\`)); n%2 == 1 {
			cut = body[:len(body)-1] + "…"
		}
	}
	return "*" + cut + "*"
}

// post creates one message in msg's chat; reply makes it a reply to the
// asking message. A non-empty nonce is enforced, so Discord creates the
// message once even when a retry repeats the request.
func (a *Adapter) post(ctx context.Context, msg *nanofleetv1.OutboundMessage, text string, reply bool, nonce string, files []*discord.File) (string, error) {
	ch, err := snowflake.Parse(msg.GetChatId())
	if err != nil {
		return "", gateway.Permanent(fmt.Errorf("chat id %q is not a Discord channel id: %w", msg.GetChatId(), err))
	}
	mc := discord.MessageCreate{
		Content: text, Files: files,
		// Answers never ping @everyone, roles or users, whatever the model
		// wrote; a reply notifies the asker as usual.
		AllowedMentions: &discord.AllowedMentions{Parse: []discord.AllowedMentionType{}, RepliedUser: true},
	}
	if nonce != "" {
		mc.Nonce, mc.EnforceNonce = nonce, true
	}
	if reply && channelconfig.On(a.cfg.ReplyToMessage, true) {
		if id, err := snowflake.Parse(msg.GetMetadata()["message_id"]); err == nil {
			mc.MessageReference = &discord.MessageReference{MessageID: &id, ChannelID: &ch, FailIfNotExists: false}
		}
	}
	m, err := a.rest.CreateMessage(ch, mc, rest.WithCtx(ctx))
	if err != nil {
		return "", err
	}
	return m.ID.String(), nil
}

// nonce is the idempotency key of piece i of reply id: Discord allows 25
// characters.
func nonce(id string, i int) string {
	if id == "" {
		return ""
	}
	return parts.PieceKey(id, i)[:25]
}
