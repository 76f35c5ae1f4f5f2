package telegram

import (
	"bytes"
	"context"
	"strings"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
)

// Upload limits of the Bot API for a file sent by multipart upload
// (https://core.telegram.org/bots/api#sending-files): 10 MB for a photo,
// 50 MB for any other file. A self-hosted telegram-bot-api server
// (apiBase) takes files up to 2000 MB, but is held to these too.
const (
	PhotoLimit    = 10 << 20
	DocumentLimit = 50 << 20
)

// attach sends attachment i of a reply; one Telegram refuses is a note
// in the chat, as on the other platforms (media.SendOrNote).
func (a *Adapter) attach(ctx context.Context, chat string, thread, i int, m *nanofleetv1.MediaRef) error {
	return media.SendOrNote(ctx, a.log.With("chat", chat, "n", i), "Telegram", m,
		func(ctx context.Context) error { return a.sendMedia(ctx, chat, thread, m) },
		classify,
		func(ctx context.Context, text string) error { return a.note(ctx, chat, thread, text) })
}

// sendMedia uploads an attachment from the object store, an image up to
// [PhotoLimit] as a photo and anything else up to [DocumentLimit] as a
// document, or sends the note saying why it cannot be (internal/media's
// Load: gone, empty or over DocumentLimit, which is then not uploaded), as
// plain text.
func (a *Adapter) sendMedia(ctx context.Context, chat string, thread int, m *nanofleetv1.MediaRef) error {
	f, err := a.media.Load(ctx, m, "Telegram", DocumentLimit)
	if err != nil || f == nil {
		return err
	}
	switch {
	case f.Note != "":
		a.log.Warn("attachment not sent", "chat", chat, "name", f.Name, "note", f.Note)
		return a.note(ctx, chat, thread, f.Note)
	case f.URL != "":
		_, err := a.bot.SendDocument(ctx, &tgbot.SendDocumentParams{ChatID: chat, MessageThreadID: thread, Document: &models.InputFileString{Data: f.URL}})
		return err
	}
	upload := &models.InputFileUpload{Filename: f.Name, Data: bytes.NewReader(f.Data)}
	if strings.HasPrefix(f.MimeType, "image/") && len(f.Data) <= PhotoLimit {
		_, err = a.bot.SendPhoto(ctx, &tgbot.SendPhotoParams{ChatID: chat, MessageThreadID: thread, Photo: upload})
		return err
	}
	_, err = a.bot.SendDocument(ctx, &tgbot.SendDocumentParams{ChatID: chat, MessageThreadID: thread, Document: upload})
	return err
}

// note tells the chat, in plain text, why an attachment is not sent.
func (a *Adapter) note(ctx context.Context, chat string, thread int, text string) error {
	_, err := a.bot.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: chat, MessageThreadID: thread, Text: text})
	return err
}
