package telegram_test

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram/telegramtest"
)

// TestAdapter runs the scenarios every adapter passes.
func TestAdapter(t *testing.T) {
	adaptertest.Run(t, adaptertest.Platform{
		Limit:  markup.TelegramLimit,
		Quotes: true,
		Start: func(t *testing.T, b *bus.Bus, common channelconfig.Common, log *slog.Logger) adaptertest.Fake {
			f := suiteFake{telegramtest.New(t, token)}
			runAdapter(t, b, f.Server, telegram.Config{Common: common}, log)
			return f
		},
	})
}

// users are the scenarios' users as Telegram user ids.
var users = map[string]int64{adaptertest.Owner: 10, adaptertest.Stranger: 66, adaptertest.Alice: 42}

type suiteFake struct{ *telegramtest.Server }

func (f suiteFake) DM(t *testing.T, n int, user, text string) (id, chat string) {
	u := users[user]
	f.Send(telegramtest.Message{UpdateID: int64(n), MessageID: n, ChatID: u, FromID: u, Text: text})
	return strconv.Itoa(n), strconv.FormatInt(u, 10)
}

func (f suiteFake) Group(t *testing.T, n int, user, text string) {
	f.Send(telegramtest.Message{UpdateID: int64(n), MessageID: n, ChatID: -100, ChatType: "supergroup", FromID: users[user], Text: text})
}

func (f suiteFake) Next(t *testing.T) adaptertest.Sent {
	t.Helper()
	c := f.Server.Next(t, adaptertest.Wait, "sendMessage")
	return adaptertest.Sent{
		Chat: c.Fields["chat_id"], Text: c.Fields["text"], At: c.At,
		Refused: c.MessageID == 0, Quotes: c.Fields["reply_parameters"] != "",
	}
}

func (f suiteFake) RateLimit(t *testing.T) time.Duration {
	f.Fail("sendMessage", telegramtest.TooManyRequests(1))
	return time.Second
}

func (f suiteFake) Malformed(t *testing.T) (string, int) {
	f.Push(1, `{"update_id": 1, "message": "not an object"}`)
	f.Push(2, `{"update_id": 2, "message": {"message_id": 1, "chat": {"id": 0}}}`)
	f.Push(3, `{"no_update_id": true}`)
	f.Push(4, `[1, 2, 3]`)
	return "dropping malformed Telegram update", 4
}
