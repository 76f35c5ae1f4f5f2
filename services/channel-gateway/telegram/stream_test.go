package telegram_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram/telegramtest"
)

// TestStreamingWaitsOutARateLimit: an edit of a streamed answer answered
// with 429 (retry_after 1) is made again once the wait has passed; the
// stream goes on to the whole answer in its one message, which is not
// deleted, and the answer is not sent again.
func TestStreamingWaitsOutARateLimit(t *testing.T) {
	streamed := strings.TrimSpace(strings.Repeat("streamed words ", 12))
	answer := streamed + " (end)" // more than the deltas: the final edit is never skipped
	// The answer waits until the message is up, as a model writes for a
	// while (published at once, it may reach the delivery before the
	// deltas reach the stream, and is then rightly sent whole).
	posted := make(chan struct{})
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, Streaming: true, StreamEditInterval: 0.1}},
		workertest.Streamed(answer, workertest.Deltas(streamed)...), workertest.HoldUntil(posted, wait))
	h.fake.Fail("editMessageText", telegramtest.TooManyRequests(1))
	h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 1, ChatID: 8, FromID: 8, Text: "stream please"})
	first := h.fake.Next(t, wait, "sendMessage")
	close(posted)
	id := strconv.Itoa(first.MessageID)
	limited := h.fake.Next(t, wait, "editMessageText", "sendMessage", "deleteMessage")
	if limited.Method != "editMessageText" || limited.Fields["message_id"] != id {
		t.Fatalf("%s call during the stream: %v", limited.Method, limited.Fields)
	}
	edits := 0
	for h.fake.Text(first.MessageID) != answer {
		c := h.fake.Next(t, wait, "editMessageText", "sendMessage", "deleteMessage")
		if c.Method != "editMessageText" || c.Fields["message_id"] != id {
			t.Fatalf("%s call during the stream: %v", c.Method, c.Fields)
		}
		if edits++; edits == 1 && c.At.Sub(limited.At) < time.Second {
			t.Errorf("edit after the rate limit came %s after it, want at least 1s", c.At.Sub(limited.At))
		}
	}
	// The durable reply must not send the answer again: the next message
	// is the reply to the next turn.
	h.fake.Send(telegramtest.Message{UpdateID: 2, MessageID: 2, ChatID: 8, FromID: 8, Text: "again"})
	c := h.fake.Next(t, wait, "sendMessage", "deleteMessage")
	var rp struct {
		MessageID int `json:"message_id"`
	}
	if err := json.Unmarshal([]byte(c.Fields["reply_parameters"]), &rp); c.Method != "sendMessage" || err != nil || rp.MessageID != 2 {
		t.Errorf("next call %s %v, want the reply to message 2: the answer was sent twice", c.Method, c.Fields)
	}
}
