package feishu_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu/feishutest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
)

// TestAdapter runs the scenarios every adapter passes.
func TestAdapter(t *testing.T) {
	adaptertest.Run(t, adaptertest.Platform{Limit: feishu.Limit, Quotes: adaptertest.QuotesEvery, Group: "oc_g", Allowlist: true, Start: startSuite})
}

// users are the scenarios' users as Feishu open ids.
var users = map[string]string{adaptertest.Owner: "ou_owner", adaptertest.Stranger: "ou_x", adaptertest.Alice: "ou_ada"}

type suiteFake struct {
	*feishutest.Server
	*adaptertest.Restarter
	chats map[string]string // the chat of each message sent to the bot
	// refuse says of each next reply whether to mark it refused: the
	// fake records refused replies as any other.
	refuse []bool
}

func (f *suiteFake) DM(t *testing.T, n int, user, text string) (id, chat string) {
	id, chat = fmt.Sprintf("ev-%d", n), "oc_p_"+users[user]
	f.chats[fmt.Sprintf("om_in%d", n)] = chat
	f.Send(t, feishutest.Text(id, users[user], chat, "p2p", fmt.Sprintf("om_in%d", n), text))
	return id, chat
}

func (f *suiteFake) Group(t *testing.T, n int, user, text string, mention bool) {
	f.chats[fmt.Sprintf("om_in%d", n)] = "oc_g"
	var mentions []feishutest.Mention
	if mention {
		text, mentions = "@_user_1 "+text, []feishutest.Mention{feishutest.BotMention}
	}
	f.Send(t, feishutest.Text(fmt.Sprintf("ev-%d", n), users[user], "oc_g", "group", fmt.Sprintf("om_in%d", n), text, mentions...))
}

// Next skips the sends the platform dropped as repeats of a uuid.
func (f *suiteFake) Next(t *testing.T) adaptertest.Sent {
	t.Helper()
	c := f.Server.Next(t, adaptertest.Wait, "reply", "create")
	for c.Duplicate {
		c = f.Server.Next(t, adaptertest.Wait, "reply", "create")
	}
	s := adaptertest.Sent{Chat: f.chats[c.Parent], Text: markdown(t, c), At: c.At, Quotes: c.Kind == "reply", Key: c.Str("uuid")}
	if c.Kind == "create" {
		s.Chat = c.Str("receive_id")
		if c.Query["receive_id_type"] != "chat_id" {
			t.Errorf("message created for a %q, want a chat_id", c.Query["receive_id_type"])
		}
	}
	if c.Kind == "reply" && len(f.refuse) > 0 {
		s.Refused, f.refuse = f.refuse[0], f.refuse[1:]
	}
	return s
}

func (f *suiteFake) RateLimit(t *testing.T, after int) time.Duration {
	f.Pass("reply", after)
	f.Fail("reply", feishutest.RateLimited(1))
	f.refuse = append(f.refuse, append(make([]bool, after), true)...)
	return time.Second
}

// Malformed also checks that each is acknowledged (so that the platform
// does not send it again) and that none broke the connection.
func (f *suiteFake) Malformed(t *testing.T) ([]string, int) {
	f.Raw(t, []byte("not a protobuf frame at all"))
	bad := []string{
		`not json`,
		`{"schema":"2.0","header":{"event_id":"ev-x","event_type":"im.message.receive_v1"},"event":"nope"}`,
		`{"schema":"2.0","header":{"event_id":"ev-y","event_type":"im.message.receive_v1"},"event":{"message":{"chat_id":"oc_1"}}}`,
		`{"schema":"2.0","header":{"event_id":"ev-z","event_type":"im.chat.updated_v1"},"event":{}}`,
	}
	for _, p := range bad {
		if code := f.WaitAck(t, f.SendPayload(t, []byte(p), 1), wait); code != 200 {
			t.Errorf("malformed event %q answered %d, want 200 so it is not sent again", p, code)
		}
	}
	ev := feishutest.Message("ev-c", "ou_ada", "oc_p2p", "p2p", "om_c", "text", "not an object")
	f.WaitAck(t, f.Send(t, ev), wait)
	if n := f.Connections(); n != 1 {
		t.Errorf("%d connections: a malformed frame broke the connection", n)
	}
	// The frame, the two undecodable events and the message without ids;
	// the unknown event type is not an error.
	return []string{"dropping malformed Feishu frame", "dropping malformed Feishu event", "dropping Feishu message event without"}, 4
}

// startSuite runs the adapter for a scenario.
func startSuite(t *testing.T, b *bus.Bus, common channelconfig.Common, log *slog.Logger) adaptertest.Fake {
	f := &suiteFake{Server: feishutest.New(t), chats: map[string]string{}}
	f.Restarter = adaptertest.NewConnectedRestarter(t, f.Server, func() func() {
		_, stop := runAdapter(t, b, f.Server, feishu.Config{Common: common}, log)
		return stop
	})
	return f
}
