package slack_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack/slacktest"
)

// TestAdapter runs the scenarios every adapter passes.
func TestAdapter(t *testing.T) {
	adaptertest.Run(t, adaptertest.Platform{
		Limit: markup.SlackLimit,
		Start: func(t *testing.T, b *bus.Bus, common channelconfig.Common, log *slog.Logger) adaptertest.Fake {
			f := suiteFake{slacktest.New(t)}
			runAdapter(t, b, f.Server, slack.Config{Common: common}, log)
			return f
		},
	})
}

// users are the scenarios' users as Slack user ids.
var users = map[string]string{adaptertest.Owner: "UOWNER", adaptertest.Stranger: "UX", adaptertest.Alice: "U1"}

type suiteFake struct{ *slacktest.Server }

func (f suiteFake) DM(t *testing.T, n int, user, text string) (id, chat string) {
	u := users[user]
	id, chat = fmt.Sprintf("Ev%d", n), "D"+u
	f.Send(t, id, slacktest.Message(u, chat, "im", fmt.Sprintf("%d.1", n), text))
	return id, chat
}

func (f suiteFake) Group(t *testing.T, n int, user, text string) {
	f.Send(t, fmt.Sprintf("Ev%d", n), slacktest.AppMention(users[user], "C1", fmt.Sprintf("%d.1", n), "<@"+slacktest.BotUserID+"> "+text))
}

func (f suiteFake) Next(t *testing.T) adaptertest.Sent {
	t.Helper()
	c := f.Server.Next(t, adaptertest.Wait, "chat.postMessage")
	return adaptertest.Sent{
		Chat: c.Fields["channel"], Text: c.Fields["text"], At: c.At,
		Refused: c.TS == "", Quotes: c.Fields["thread_ts"] != "",
	}
}

func (f suiteFake) RateLimit(t *testing.T) time.Duration {
	f.Fail("chat.postMessage", slacktest.Failure{Status: 429, RetryAfter: 1})
	return time.Second
}

func (f suiteFake) Malformed(t *testing.T) (string, int) {
	f.Raw(t, `{"type":"events_api","envelope_id":"bad1","payload":{"event":"not an object"}}`)
	f.Raw(t, `{"type":"events_api","envelope_id":"bad2","payload":{"event_id":"Ev9","event":{"type":"message"}}}`)
	f.Raw(t, `{"type":"mystery","envelope_id":"bad3"}`)
	f.Raw(t, `not json at all`)
	f.WaitAck(t, "bad1", adaptertest.Wait)
	f.WaitAck(t, "bad2", adaptertest.Wait)
	return "dropping malformed Slack", 2
}
