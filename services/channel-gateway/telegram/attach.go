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
	f, err := a.media.Load(ctx, m)
	if err != nil || f == nil {
		return err
	}
	if f.URL != "" {
		_, err := a.bot.SendDocument(ctx, &tgbot.SendDocumentParams{ChatID: chat, MessageThreadID: thread, Document: &models.InputFileString{Data: f.URL}})
		return err
	}
	upload := &models.InputFileUpload{Filename: f.Name, Data: strings.NewReader(string(f.Data))}
	if strings.HasPrefix(m.GetMimeType(), "image/") {
		_, err = a.bot.SendPhoto(ctx, &tgbot.SendPhotoParams{ChatID: chat, MessageThreadID: thread, Photo: upload})
		return err
	}
	_, err = a.bot.SendDocument(ctx, &tgbot.SendDocumentParams{ChatID: chat, MessageThreadID: thread, Document: upload})
	return err
}
