package telegram

import (
	"context"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// startTyping shows "typing…" in chat (and its forum thread) until the
// turn's answer arrives; see internal/typing.
func (a *Adapter) startTyping(chat string, thread int) {
	a.typing.Start(chat, func(ctx context.Context) error {
		_, err := a.bot.SendChatAction(ctx, &tgbot.SendChatActionParams{
			ChatID: chat, MessageThreadID: thread, Action: models.ChatActionTyping,
		})
		return err
	})
}
