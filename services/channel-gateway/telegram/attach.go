package telegram

import (
	"context"
	"strings"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// sendMedia uploads an attachment from the object store.
func (a *Adapter) sendMedia(ctx context.Context, chat string, thread int, m *nanofleetv1.MediaRef) error {
	if m.GetObject() == "" {
		if m.GetUrl() == "" {
			return nil
		}
		_, err := a.bot.SendDocument(ctx, &tgbot.SendDocumentParams{ChatID: chat, MessageThreadID: thread, Document: &models.InputFileString{Data: m.GetUrl()}})
		return err
	}
	data, err := a.media.Get(ctx, m.GetObject())
	if err != nil {
		return err
	}
	name := m.GetName()
	if name == "" {
		name = "file"
	}
	upload := &models.InputFileUpload{Filename: name, Data: strings.NewReader(string(data))}
	if strings.HasPrefix(m.GetMimeType(), "image/") {
		_, err = a.bot.SendPhoto(ctx, &tgbot.SendPhotoParams{ChatID: chat, MessageThreadID: thread, Photo: upload})
		return err
	}
	_, err = a.bot.SendDocument(ctx, &tgbot.SendDocumentParams{ChatID: chat, MessageThreadID: thread, Document: upload})
	return err
}
