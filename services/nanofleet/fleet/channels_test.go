package fleet_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord/discordtest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack/slacktest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram/telegramtest"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// startWithChannels runs the all-in-one with the gateway and the given
// channels section.
func startWithChannels(t *testing.T, llm *llmtest.Server, channels map[string]any) *fleet.Fleet {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	f, err := fleet.Start(ctx, fleet.Options{
		File:    loadConfig(t, testConfig(t, llm.URL(), map[string]any{"channels": channels})),
		Getenv:  func(string) string { return "" },
		DataDir: t.TempDir(), Workspace: t.TempDir(), Gateway: true, GatewayListen: listenAddr(t),
	}, fleet.WithLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return f
}

// startChannel runs the all-in-one with one channel, name, enabled and
// configured by section, and the web chat and API off.
func startChannel(t *testing.T, llm *llmtest.Server, name string, section map[string]any) *fleet.Fleet {
	t.Helper()
	section["enabled"] = true
	return startWithChannels(t, llm, map[string]any{
		name:  section,
		"web": map[string]any{"enabled": false},
		"api": map[string]any{"enabled": false},
	})
}

// greeting is a model that answers a question asking for something long
// with long, paragraphs of a sentence, and anything else with a greeting
// in Markdown.
func greeting(t *testing.T, paragraphs int) (llm *llmtest.Server, long string) {
	long = strings.Repeat("A paragraph of the long answer.\n\n", paragraphs)
	llm = llmtest.NewServer(t)
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		if strings.Contains(r.LastUserText(), "long") {
			return llmtest.Text(long)
		}
		return llmtest.Text("Hi Ada, **nice** to meet you.")
	})
	return llm, long
}

// answering is a model that answers every question with prefix and the
// question.
func answering(t *testing.T, prefix string) *llmtest.Server {
	llm := llmtest.NewServer(t)
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		return llmtest.Text(prefix + r.LastUserText())
	})
	return llm
}

// TestTelegramThroughTheFleet: a Telegram update goes through the real
// gateway, worker and fake model, and the answer reaches the Bot API as
// a reply to the asking message; a long answer is split.
func TestTelegramThroughTheFleet(t *testing.T) {
	const token = "123456:FLEET-test"
	bot := telegramtest.New(t, token)
	llm, _ := greeting(t, 280) // ~9000 chars
	startChannel(t, llm, "telegram", map[string]any{"token": token, "apiBase": bot.URL, "allowFrom": []string{"42"}})
	bot.Send(telegramtest.Message{UpdateID: 1, MessageID: 10, ChatID: 42, FromID: 42, Text: "Hello, I am Ada"})
	c := bot.Next(t, 30*time.Second, "sendMessage")
	if !strings.Contains(c.Fields["text"], "nice") || c.Fields["chat_id"] != "42" {
		t.Fatalf("sendMessage = %v", c.Fields)
	}
	if !strings.Contains(c.Fields["text"], "<b>nice</b>") {
		t.Errorf("markdown not rendered as Telegram HTML: %q", c.Fields["text"])
	}
	if !strings.Contains(c.Fields["reply_parameters"]+c.Fields["reply_to_message_id"], "10") {
		t.Errorf("reply does not point at the asking message: %v", c.Fields)
	}
	if !strings.Contains(llm.Requests()[0].LastUserText(), "Hello, I am Ada") {
		t.Errorf("model got %q", llm.Requests()[0].LastUserText())
	}
	bot.Send(telegramtest.Message{UpdateID: 2, MessageID: 11, ChatID: 42, FromID: 42, Text: "a long answer please"})
	var parts int
	for parts < 3 {
		c := bot.Next(t, 30*time.Second, "sendMessage")
		if !strings.Contains(c.Fields["text"], "paragraph") {
			t.Fatalf("unexpected message %v", c.Fields)
		}
		if len(c.Fields["text"]) > 4096 {
			t.Fatalf("part of %d chars", len(c.Fields["text"]))
		}
		parts++
	}
}

// TestSlackThroughTheFleet: a Slack DM over Socket Mode goes through the
// real fleet and the answer is posted with chat.postMessage.
func TestSlackThroughTheFleet(t *testing.T) {
	sl := slacktest.New(t)
	llm := answering(t, "slack answer to ")
	startChannel(t, llm, "slack", map[string]any{"botToken": "xoxb-test", "appToken": "xapp-test", "apiUrl": sl.APIURL, "allowFrom": []string{"U1"}})
	sl.WaitConnected(t, 30*time.Second)
	sl.Send(t, "Ev1", slacktest.Message("U1", "D1", "im", "1700000000.000100", "hello from slack"))
	c := sl.Next(t, 30*time.Second, "chat.postMessage")
	if !strings.Contains(c.Fields["text"], "slack answer to hello from slack") || c.Fields["channel"] != "D1" {
		t.Fatalf("chat.postMessage = %v", c.Fields)
	}
}

// TestDiscordThroughTheFleet: a Discord DM goes through the real gateway,
// worker and fake model, and the answer reaches Discord as a reply to the
// asking message; a long answer is split at 2000 characters.
func TestDiscordThroughTheFleet(t *testing.T) {
	const token = "FLEET.discord.token"
	dc := discordtest.New(t, token)
	llm, long := greeting(t, 180) // ~5900 chars
	f := startChannel(t, llm, "discord", map[string]any{"token": token, "apiBase": dc.URL, "allowFrom": []string{"42"}})
	dc.WaitConnected(t, 30*time.Second)
	dc.Send(discordtest.Message{ID: "1001", ChannelID: "77", AuthorID: "42", Username: "ada", Content: "Hello, I am Ada"})
	c := dc.Next(t, 30*time.Second, "POST /channels/{id}/messages")
	if c.Content() != "Hi Ada, **nice** to meet you." || c.ChannelID != "77" {
		t.Fatalf("created %q in %s", c.Content(), c.ChannelID)
	}
	if ref, _ := c.Body["message_reference"].(map[string]any); ref["message_id"] != "1001" {
		t.Errorf("reply does not point at the asking message: %v", c.Body)
	}
	if !strings.Contains(llm.Requests()[0].LastUserText(), "Hello, I am Ada") {
		t.Errorf("model got %q", llm.Requests()[0].LastUserText())
	}
	dc.Send(discordtest.Message{ID: "1002", ChannelID: "77", AuthorID: "42", Username: "ada", Content: "a long answer please"})
	var got []string
	for len(strings.Join(got, "\n\n")) < len(strings.TrimSpace(long)) {
		c := dc.Next(t, 30*time.Second, "POST /channels/{id}/messages")
		if n := len([]rune(c.Content())); n > 2000 || c.Status != 200 {
			t.Fatalf("piece of %d chars answered %d", n, c.Status)
		}
		got = append(got, c.Content())
	}
	if len(got) != 3 || strings.Join(got, "\n\n") != strings.TrimSpace(long) {
		t.Errorf("%d pieces that do not add up to the answer", len(got))
	}
	// The loop ends with the answer's length: a piece sent after it is
	// seen once both replies' deliveries are over.
	waitDelivered(t, f.Bus, "discord", 2)
	dc.None(t, "POST /channels/{id}/messages")
}
