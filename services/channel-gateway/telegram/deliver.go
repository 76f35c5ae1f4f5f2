package telegram

import (
	"context"
	"errors"
	"html"
	"regexp"
	"strings"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// Deliver sends one durable reply, split and rendered, then its
// attachments, continuing after the pieces an earlier attempt already
// sent.
func (a *Adapter) Deliver(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	chat, thread := msg.GetChatId(), atoi(msg.GetMetadata()["thread_id"])
	a.typing.StopIfEnded(msg)
	pieces := markup.SplitRendered(msg.GetContent(), markup.TelegramLimit, maxText, shown)
	replyTo := 0
	if channelconfig.On(a.cfg.ReplyToMessage, true) {
		replyTo = atoi(msg.GetMetadata()["message_id"])
	}
	start, err := a.streams.Start(ctx, msg, len(pieces), a.sent)
	if err != nil {
		return err
	}
	err = a.sent.SendReply(ctx, msg.GetId(), start, pieces, msg.GetMedia(),
		func(ctx context.Context, i int, piece string) error {
			if i > 0 {
				return a.send(ctx, chat, thread, 0, piece)
			}
			return a.send(ctx, chat, thread, replyTo, piece)
		},
		func(ctx context.Context, i int, m *nanofleetv1.MediaRef) error {
			return a.attach(ctx, chat, thread, i, m)
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
	html, ok := a.cfg.LiveText(msg, a.deps.SendProgress, a.deps.SendToolHints, inTag("i"), inTag("code"))
	if !ok {
		return nil
	}
	chat, thread := msg.GetChatId(), atoi(msg.GetMetadata()["thread_id"])
	_, err := a.bot.SendMessage(ctx, &tgbot.SendMessageParams{
		ChatID: chat, MessageThreadID: thread, Text: html, ParseMode: models.ParseModeHTML,
		LinkPreviewOptions: &models.LinkPreviewOptions{IsDisabled: tgbot.True()},
	})
	if err == nil {
		a.startTyping(chat, thread) // the chat action ends with a message
	}
	return err
}

// inTag shows text as HTML in tag, cut to the message limit and escaped.
func inTag(tag string) func(string) string {
	return func(s string) string {
		return "<" + tag + ">" + markup.EscapeHTML(markup.Truncate(s, markup.TelegramLimit)) + "</" + tag + ">"
	}
}

// send sends one piece as HTML, and as plain text if Telegram rejects the
// HTML.
func (a *Adapter) send(ctx context.Context, chat string, thread, replyTo int, md string) error {
	_, err := a.sendID(ctx, chat, thread, replyTo, md)
	return err
}

// sendID is send returning the new message's id.
func (a *Adapter) sendID(ctx context.Context, chat string, thread, replyTo int, md string) (int, error) {
	p := &tgbot.SendMessageParams{
		ChatID: chat, MessageThreadID: thread, Text: markup.TelegramHTML(md), ParseMode: models.ParseModeHTML,
	}
	if replyTo != 0 {
		p.ReplyParameters = &models.ReplyParameters{MessageID: replyTo, AllowSendingWithoutReply: true}
	}
	m, err := a.bot.SendMessage(ctx, p)
	if err == nil {
		return m.ID, nil
	}
	if !errors.Is(err, tgbot.ErrorBadRequest) {
		return 0, err
	}
	// 400 is how Telegram says "can't parse entities"; whatever the cause,
	// plain text is the fallback, and a second 400 is final.
	a.log.Info("telegram rejected HTML, sending plain text", "chat", chat, "err", err)
	p.Text, p.ParseMode = plain(md), ""
	m, err = a.bot.SendMessage(ctx, p)
	if err != nil {
		return 0, err
	}
	return m.ID, nil
}

// shown is how long Telegram counts md once sent: a piece goes as HTML,
// or as plain text when Telegram refuses the HTML, so the longer of the
// plain text and the HTML's text after entity parsing. The plain text is
// mostly the longer (it spells links out and marks quotes), but not for
// an unfinished table, as a stream shows one: 3,969 against 4,269.
func shown(md string) int {
	return max(markup.Len(plain(md)), markup.Len(html.UnescapeString(htmlTag.ReplaceAllString(markup.TelegramHTML(md), ""))))
}

// htmlTag is a tag of the HTML Telegram is sent, which its entity
// parsing removes.
var htmlTag = regexp.MustCompile(`<[^>]*>`)

func plain(md string) string {
	if s := markup.Plain(md); strings.TrimSpace(s) != "" {
		return s
	}
	return md
}
