package fleet_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord/discordtest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack/slacktest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram/telegramtest"
)

// streamedAnswer is 40 words that the fake model streams one chunk each,
// 100ms apart: 40 chunks over 4s.
var streamedAnswer = strings.TrimSpace(strings.Repeat("word ", 40))

// streamingModel answers with streamedAnswer.
type streamingModel struct {
	*llmtest.Server
}

func newStreamingModel(t *testing.T) *streamingModel {
	m := &streamingModel{Server: llmtest.NewServer(t)}
	m.Handle(func(*llmtest.RecordedRequest) llmtest.Reply {
		return llmtest.Text(streamedAnswer).WithChunkDelay(100 * time.Millisecond)
	})
	return m
}

// checkFirst checks that the stream's first message, showing text, came
// while the model was still streaming: it shows a part of the answer, not
// all of it. (How soon after the first chunk is a benchmark's matter: a
// wall-clock bound fails on a loaded machine.)
func checkFirst(t *testing.T, text, what string) {
	t.Helper()
	if text == "" || text == streamedAnswer || !strings.HasPrefix(streamedAnswer, text) {
		t.Errorf("first %s shows %q, want a part of the answer, shown while the model streams", what, text)
	}
}

const editInterval = 500 * time.Millisecond

// followEdits follows a streamed message, sent at first, until shown
// returns the whole answer; next waits for the next edit of the message
// (failing the test on any other call) and returns when it came. Each
// edit must come at least editInterval after the one before. It returns
// how many edits there were.
func followEdits(t *testing.T, edit string, first time.Time, shown func() string, next func() time.Time) int {
	t.Helper()
	last, edits := first, 0
	for shown() != streamedAnswer {
		at := next()
		if d := at.Sub(last); d < editInterval {
			t.Errorf("%s %d came %s after the one before, under streamEditInterval %s", edit, edits+1, d, editInterval)
		}
		last = at
		edits++
	}
	return edits
}

// followFallback follows a streamed answer whose edits all fail, from
// the message the stream began with, partial, which showed first: the
// partial message is deleted and the answer follows whole, once. shows is
// what a message shows now ("" once deleted); next waits for the next
// message sent and returns its text; none, called once the reply's
// delivery is over, fails the test on any other message sent.
func followFallback[ID any](t *testing.T, partial ID, first string, shows func(ID) string, next func() string, none func()) {
	t.Helper()
	for text := first; text != streamedAnswer; {
		text = next()
	}
	if s := shows(partial); s != "" {
		t.Errorf("the partial message %v still shows %q", partial, s)
	}
	none() // the whole answer once
}

// TestDiscordStreamsByEditing: with streaming on, Discord sees one reply
// created while the model streams, edited at most once per
// streamEditInterval, ending with exactly the model's answer.
func TestDiscordStreamsByEditing(t *testing.T) {
	const token = "FLEET.discord.stream"
	dc := discordtest.New(t, token)
	llm := newStreamingModel(t)
	f := startChannel(t, llm.Server, "discord", map[string]any{"token": token, "apiBase": dc.URL, "allowFrom": []string{"*"},
		"streaming": true, "streamEditInterval": editInterval.Seconds()})
	dc.WaitConnected(t, 30*time.Second)
	dc.Send(discordtest.Message{ID: "1001", ChannelID: "77", AuthorID: "42", Content: "stream please"})

	c := dc.Next(t, 30*time.Second, "POST /channels/{id}/messages")
	checkFirst(t, c.Content(), "message")
	if ref, _ := c.Body["message_reference"].(map[string]any); ref["message_id"] != "1001" {
		t.Errorf("streamed message is not a reply: %v", c.Body)
	}
	edits := followEdits(t, "edit", c.At, func() string { return dc.Text(c.MessageID) }, func() time.Time {
		e := dc.Next(t, 30*time.Second, "PATCH /channels/{id}/messages/{id}", "POST /channels/{id}/messages")
		if e.Route != "PATCH /channels/{id}/messages/{id}" || e.MessageID != c.MessageID {
			t.Fatalf("unexpected %s %s %q", e.Route, e.MessageID, e.Content())
		}
		return e.At
	})
	if edits < 3 {
		t.Errorf("%d edits over a 4s answer, want it shown as it grows", edits)
	}
	waitDelivered(t, f.Bus, "discord", 1) // the reply's delivery is over: nothing more to come
	if n := len(dc.Created()); n != 1 {
		t.Errorf("%d messages created, want the one edited", n)
	}
}

// TestDiscordStreamFallsBackWhenEditsFail: every edit fails, so the answer
// is sent as one whole message, once.
func TestDiscordStreamFallsBackWhenEditsFail(t *testing.T) {
	const token = "FLEET.discord.stream"
	dc := discordtest.New(t, token)
	dc.FailAll("PATCH /channels/{id}/messages/{id}", discordtest.Failure{Status: 403, Code: 50005, Message: "Cannot edit a message authored by another user"})
	llm := newStreamingModel(t)
	startChannel(t, llm.Server, "discord", map[string]any{"token": token, "apiBase": dc.URL, "allowFrom": []string{"*"},
		"streaming": true, "streamEditInterval": editInterval.Seconds()})
	dc.WaitConnected(t, 30*time.Second)
	dc.Send(discordtest.Message{ID: "1001", ChannelID: "77", AuthorID: "42", Content: "stream please"})
	for {
		c := dc.Next(t, 30*time.Second, "POST /channels/{id}/messages")
		if c.Content() == streamedAnswer {
			break
		}
	}
	whole := 0
	for _, c := range dc.Created() {
		if c.Content() == streamedAnswer {
			whole++
		}
	}
	// The partial message the stream began with, deleted, and the whole
	// answer: one message shown.
	created, deleted := dc.Created(), dc.Deleted()
	if whole != 1 || len(created) != 2 {
		t.Errorf("%d whole messages of %d created, want 1 of 2", whole, len(created))
	}
	if len(deleted) != 1 || len(created) == 0 || deleted[0] != created[0].MessageID {
		t.Errorf("deleted %v, want the partial message", deleted)
	}
}

// TestTelegramStreamsByEditing: the same through editMessageText; an
// edit answered 429 is tried again after retry_after; and the fallback to
// one whole message when Telegram refuses the edits.
func TestTelegramStreamsByEditing(t *testing.T) {
	for _, mode := range []string{"edits", "rate-limited", "failing"} {
		t.Run(mode, func(t *testing.T) {
			failing := mode == "failing"
			const token = "123456:FLEET-stream"
			bot := telegramtest.New(t, token)
			if mode == "rate-limited" {
				bot.Fail("editMessageText", telegramtest.TooManyRequests(1))
			}
			if failing {
				bot.Fail("editMessageText", refusals(telegramtest.Failure{Code: 400, Description: "Bad Request: message can't be edited"})...)
			}
			llm := newStreamingModel(t)
			f := startChannel(t, llm.Server, "telegram", map[string]any{"token": token, "apiBase": bot.URL, "allowFrom": []string{"42"},
				"streaming": true, "streamEditInterval": editInterval.Seconds()})
			bot.Send(telegramtest.Message{UpdateID: 1, MessageID: 10, ChatID: 42, FromID: 42, Text: "stream please"})
			c := bot.Next(t, 30*time.Second, "sendMessage")
			checkFirst(t, c.Fields["text"], "message")
			if failing {
				followFallback(t, c.MessageID, c.Fields["text"], bot.Text, func() string {
					return bot.Next(t, 30*time.Second, "sendMessage").Fields["text"]
				}, func() { waitDelivered(t, f.Bus, "telegram", 1); bot.None(t, "sendMessage") })
				return
			}
			n, limitedAt := 0, time.Time{}
			edits := followEdits(t, "edit", c.At, func() string { return bot.Text(c.MessageID) }, func() time.Time {
				e := bot.Next(t, 30*time.Second, "editMessageText", "sendMessage")
				if e.Method != "editMessageText" {
					t.Fatalf("unexpected %s %q", e.Method, e.Fields["text"])
				}
				if !limitedAt.IsZero() {
					if d := e.At.Sub(limitedAt); d < time.Second {
						t.Errorf("edit %s after a 429 with retry_after 1", d)
					}
					limitedAt = time.Time{}
				}
				if mode == "rate-limited" && n == 0 {
					limitedAt = e.At // the first edit is answered 429
				}
				n++
				return e.At
			})
			if edits < 3 {
				t.Errorf("%d edits over a 4s answer", edits)
			}
			waitDelivered(t, f.Bus, "telegram", 1) // the reply's delivery is over: nothing more to come
			if texts := sentTexts(bot); len(texts) != 0 {
				t.Errorf("messages sent besides the streamed one: %q", texts)
			}
		})
	}
}

// TestSlackStreamsByUpdating: the same through chat.update, and the
// fallback to one whole message when Slack refuses the updates.
func TestSlackStreamsByUpdating(t *testing.T) {
	for _, failing := range []bool{false, true} {
		t.Run("failing="+strconv.FormatBool(failing), func(t *testing.T) {
			sl := slacktest.New(t)
			if failing {
				sl.Fail("chat.update", refusals(slacktest.Failure{Error: "cant_update_message"})...)
			}
			llm := newStreamingModel(t)
			f := startChannel(t, llm.Server, "slack", map[string]any{"botToken": "xoxb-test", "appToken": "xapp-test", "apiUrl": sl.APIURL,
				"allowFrom": []string{"U1"}, "streaming": true, "streamEditInterval": editInterval.Seconds()})
			sl.WaitConnected(t, 30*time.Second)
			sl.Send(t, "Ev1", slacktest.Message("U1", "D1", "im", "1700000000.000100", "stream please"))
			c := sl.Next(t, 30*time.Second, "chat.postMessage")
			checkFirst(t, c.Fields["text"], "message")
			if failing {
				followFallback(t, c.TS, c.Fields["text"], sl.Text, func() string {
					return sl.Next(t, 30*time.Second, "chat.postMessage").Fields["text"]
				}, func() { waitDelivered(t, f.Bus, "slack", 1); sl.None(t, "chat.postMessage") })
				return
			}
			edits := followEdits(t, "update", c.At, func() string { return sl.Text(c.TS) }, func() time.Time {
				e := sl.Next(t, 30*time.Second, "chat.update", "chat.postMessage")
				if e.Method != "chat.update" || e.Fields["ts"] != c.TS {
					t.Fatalf("unexpected %s %q", e.Method, e.Fields["text"])
				}
				return e.At
			})
			if edits < 3 {
				t.Errorf("%d updates over a 4s answer", edits)
			}
		})
	}
}

// refusals is f a hundred times over, for a fake to refuse every edit of
// an answer.
func refusals[F any](f F) []F {
	fs := make([]F, 100)
	for i := range fs {
		fs[i] = f
	}
	return fs
}

// waitDelivered waits until the gateways on b are done with the test's n
// replies on channel: each delivered and acknowledged (a gateway
// acknowledges a reply once its delivery is over), or dead-lettered.
func waitDelivered(t *testing.T, b *bus.Bus, channel string, n int) {
	t.Helper()
	bustest.WaitAcked(t, b, b.Space.OutboundStream(), b.Space.GatewayConsumer(channel), n, 30*time.Second)
}

// sentTexts drains the calls seen so far and returns the texts sent with
// sendMessage.
func sentTexts(bot *telegramtest.Server) []string {
	var out []string
	for {
		select {
		case c := <-bot.Calls():
			if c.Method == "sendMessage" {
				out = append(out, c.Fields["text"])
			}
		default:
			return out
		}
	}
}
