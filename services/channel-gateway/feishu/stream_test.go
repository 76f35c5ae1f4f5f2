package feishu_test

import (
	"strings"
	"testing"
	"time"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu/feishutest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
)

// TestStreamedTextRepliesOnce: a streamed answer in text format is shown
// in a card, then the reply sends what the card did not hold. A piece that
// fits a card may need cutting as text (its plain text pads a table to
// the widest cell on every row); the stream's card and the reply must cut
// alike, or the reply repeats part of what the card shows.
func TestStreamedTextRepliesOnce(t *testing.T) {
	table := adaptertest.PaddedTable(800, 350)
	answer := table + "\n\nEND"
	posted := make(chan struct{})
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, Streaming: true, StreamEditInterval: 0.1}, ReplyFormat: feishu.FormatText},
		workertest.Streamed(answer, workertest.Deltas(answer)...), workertest.HoldUntil(posted, wait))
	h.fake.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_1", "table please"))
	card := h.fake.Next(t, wait, "reply")
	close(posted)
	var texts []string
	for len(texts) == 0 || !strings.HasSuffix(texts[len(texts)-1], "END") {
		c := h.fake.Next(t, wait, "reply", "patch")
		if c.TooLong {
			t.Fatalf("%s of %d bytes refused", c.Kind, c.Size)
		}
		if c.Kind == "patch" {
			continue
		}
		text, _ := c.Content()["text"].(string)
		texts = append(texts, text)
	}
	shown := feishutest.CardText(h.fake.Content(card.ID)) + strings.Join(texts, "")
	if n := strings.Count(shown, "wide"); n != 800 {
		t.Errorf("the card and %d text messages show %d of the table's 800 words", len(texts), n)
	}
}

// TestStreamingUpdatesOneCard: with streaming on, the answer appears in
// one card, posted at the first delta and updated as the deltas come, at
// most once per interval; the last update is the whole answer, and no
// second message repeats it. An update answered with a rate limit (429,
// x-ogw-ratelimit-reset) is made again once the reset has passed, and the
// stream goes on. With updates failing, the partial card is deleted and
// the answer arrives whole in a message of its own.
func TestStreamingUpdatesOneCard(t *testing.T) {
	streamed := strings.TrimSpace(strings.Repeat("streamed words ", 12))
	// The final answer ends with more than the deltas carried, so that it
	// always takes an update, however many deltas the first post shows.
	answer := streamed + " (end)"
	stream := workertest.Streamed(answer, workertest.Deltas(streamed)...)
	script := func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		if in.GetMetadata()["stream"] != "true" {
			t.Errorf("inbound metadata %v does not ask for deltas", in.GetMetadata())
		}
		return stream(in)
	}
	const reset = 2 // seconds, longer than the interval
	tests := []struct {
		name string
		fail *feishutest.Failure // the first update's answer
		// limited is the wait the first update's failure asks for; the
		// stream goes on after it. Any other failure ends the stream.
		limited time.Duration
	}{
		{"updates", nil, 0},
		{"update rate limited", &feishutest.Failure{Status: 429, Code: 99991400, Msg: "request trigger frequency limit", Reset: reset}, reset * time.Second},
		{"updates failing", &feishutest.Failure{Status: 400, Code: 230001, Msg: "not editable"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The answer is held back until the card is up, as a model
			// writes for a while: published right after its deltas, it can
			// reach the delivery before the deltas reach the stream, and
			// is then (correctly) sent whole.
			posted := make(chan struct{})
			// The streams wait on a fake clock that the fake stamps its
			// calls with: the updates' stamps are apart by the waits made
			// between them, however late the test reads them.
			const interval = 200 * time.Millisecond
			h := startPaced(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, Streaming: true, StreamEditInterval: interval.Seconds()}},
				adaptertest.NewClock(), script, workertest.HoldUntil(posted, wait))
			failing := tt.fail != nil && tt.limited == 0
			if tt.fail != nil {
				h.fake.Fail("patch", *tt.fail)
			}
			h.fake.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_1", "stream please"))
			first := h.fake.Next(t, wait, "reply")
			close(posted)
			if md := markdown(t, first); md == "" || !strings.HasPrefix(answer, md) {
				t.Fatalf("streamed card starts with %q", md)
			}
			if failing {
				if del := h.fake.Next(t, wait, "delete"); del.Parent != first.ID || h.fake.Content(first.ID) != "" {
					t.Errorf("deleted %q, want the partial card %q gone", del.Parent, first.ID)
				}
				whole := h.fake.Next(t, wait, "reply", "create")
				if md := markdown(t, whole); md != answer {
					t.Errorf("after failed updates, message = %q, want the whole answer", md)
				}
				return
			}
			last := first.At
			patches := 0
			for feishutest.CardText(h.fake.Content(first.ID)) != answer {
				c := h.fake.Next(t, wait, "patch", "reply", "create")
				if c.Kind != "patch" || c.Parent != first.ID {
					t.Fatalf("%s call during the stream: %+v", c.Kind, c)
				}
				patches++
				if gap := c.At.Sub(last); gap < interval {
					t.Errorf("two updates %s apart, interval %s", gap, interval)
				}
				if gap := c.At.Sub(last); patches == 2 && gap < tt.limited {
					t.Errorf("update after the rate limit came %s after it, want at least %s", gap, tt.limited)
				}
				last = c.At
			}
			if patches == 0 || tt.limited > 0 && patches < 2 {
				t.Errorf("the card was updated %d times", patches)
			}
			// The durable reply must not post the answer again: a sentinel
			// turn's reply is the next message.
			h.fake.Send(t, feishutest.Text("ev-2", "ou_ada", "oc_p2p", "p2p", "om_2", "again"))
			if c := h.fake.Next(t, wait, "reply", "create"); c.Parent != "om_2" {
				t.Errorf("next message replies to %q, want om_2: the answer was posted twice", c.Parent)
			}
		})
	}
}
