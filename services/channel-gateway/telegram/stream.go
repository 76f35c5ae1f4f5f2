package telegram

import (
	"context"
	"errors"
	"strconv"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// streamer lets [editstream] post and edit Telegram messages. Partial
// texts are rendered like the final one, so that an unchanged final text
// needs no edit (Telegram refuses an edit that changes nothing).
type streamer struct{ a *Adapter }

func (s streamer) Post(ctx context.Context, msg *nanofleetv1.OutboundMessage, md string) (string, error) {
	replyTo := 0
	if channelconfig.On(s.a.cfg.ReplyToMessage, true) {
		replyTo = atoi(msg.GetMetadata()["message_id"])
	}
	id, err := s.a.sendID(ctx, msg.GetChatId(), atoi(msg.GetMetadata()["thread_id"]), replyTo, md)
	return strconv.Itoa(id), classify(err)
}

func (s streamer) Delete(ctx context.Context, msg *nanofleetv1.OutboundMessage, id string) error {
	_, err := s.a.bot.DeleteMessage(ctx, &tgbot.DeleteMessageParams{ChatID: msg.GetChatId(), MessageID: atoi(id)})
	return err
}

func (s streamer) Edit(ctx context.Context, msg *nanofleetv1.OutboundMessage, id, md string, _ bool) error {
	p := &tgbot.EditMessageTextParams{
		ChatID: msg.GetChatId(), MessageID: atoi(id), Text: markup.TelegramHTML(md), ParseMode: models.ParseModeHTML,
	}
	_, err := s.a.bot.EditMessageText(ctx, p)
	if err == nil || !errors.Is(err, tgbot.ErrorBadRequest) {
		return classify(err)
	}
	p.Text, p.ParseMode = plain(md), ""
	_, err = s.a.bot.EditMessageText(ctx, p)
	return classify(err)
}
