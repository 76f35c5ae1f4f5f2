package dingtalk_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk/dingtalktest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// TestOutboundAttachmentsAreUploaded: after the text (by session
// webhook), pictures and files are uploaded with media/upload and sent by
// the robot API as sampleImageMsg and sampleFile naming the media id, in
// a group by its conversation id; what DingTalk cannot take becomes a
// text note, so nothing is lost silently.
func TestOutboundAttachmentsAreUploaded(t *testing.T) {
	// upload is the media type uploaded ("" none); msgKey and param the
	// robot message that shows it (the media id checked apart), note a
	// text the message must contain instead.
	tests := []struct {
		name, upload, msgKey, note string
		param                      map[string]string
		ref                        *nanofleetv1.MediaRef
		data                       []byte
	}{
		{name: "picture", ref: &nanofleetv1.MediaRef{Object: "t/chart.png", Name: "chart.png", MimeType: "image/png"},
			data: append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 100)...), upload: "image", msgKey: "sampleImageMsg"},
		{name: "document", ref: &nanofleetv1.MediaRef{Object: "t/report.pdf", Name: "report.pdf", MimeType: "application/pdf"},
			data: []byte("%PDF-1.4 report"), upload: "file", msgKey: "sampleFile", param: map[string]string{"fileName": "report.pdf", "fileType": "pdf"}},
		{name: "a type robots cannot send", ref: &nanofleetv1.MediaRef{Object: "t/notes.txt", Name: "notes.txt", MimeType: "text/plain"}, data: []byte("hi"),
			note: "notes.txt is a kind of file DingTalk robots cannot send"},
		{name: "over the limit", ref: &nanofleetv1.MediaRef{Object: "t/huge.zip", Name: "huge.zip", Size: dingtalk.MediaLimit + 1},
			note: "huge.zip is 20.0 MB, over DingTalk's 20 MB limit"},
		{name: "gone from the store", ref: &nanofleetv1.MediaRef{Object: "t/gone.pdf", Name: "gone.pdf"},
			note: "gone.pdf is no longer stored"},
	}
	var refs []*nanofleetv1.MediaRef
	var data [][]byte
	for _, tt := range tests {
		refs, data = append(refs, tt.ref), append(data, tt.data)
	}
	cfg := dingtalk.Config{}
	cfg.AllowFrom, cfg.GroupPolicy = []string{"*"}, channelconfig.GroupOpen
	h := start(t, cfg, workertest.WithMedia("here", refs...))
	workertest.StoreMedia(t, h.Bus, refs, data)
	h.fake.Send(t, group("msg-1", "staff-ada", "files please", false))
	if c := h.fake.Next(t, wait, "webhook", "otosend", "groupsend"); c.Kind != "webhook" {
		t.Fatalf("text went by %s, want the session webhook", c.Kind)
	} else if _, text := c.Markdown(); text != "here" {
		t.Fatalf("text = %q", text)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var id string
			if tt.upload != "" {
				up := h.fake.Next(t, wait, "upload")
				if up.Str("type") != tt.upload || up.MediaID == "" || !bytes.Equal(up.Upload, tt.data) || up.Str("filename") != tt.ref.GetName() {
					t.Fatalf("upload = %s %q as %q, %d bytes; want %s %q of %d bytes", up.Str("type"), up.Str("filename"), up.MediaID, len(up.Upload), tt.upload, tt.ref.GetName(), len(tt.data))
				}
				id = up.MediaID
			}
			c := h.fake.Next(t, wait, "webhook", "otosend", "groupsend")
			if tt.note != "" {
				text, _ := c.Body["text"].(map[string]any)["content"].(string)
				if c.Kind == "groupsend" {
					text = c.Param()["content"]
				}
				if !strings.Contains(text, tt.note) {
					t.Errorf("note by %s = %v, want text containing %q", c.Kind, c.Body, tt.note)
				}
				return
			}
			p := c.Param()
			if c.Kind != "groupsend" || c.Str("openConversationId") != "cidGroup1" || c.Str("msgKey") != tt.msgKey {
				t.Fatalf("sent by %s to %q as %q, want groupsend to cidGroup1 as %s", c.Kind, c.Str("openConversationId"), c.Str("msgKey"), tt.msgKey)
			}
			if got := p["photoURL"] + p["mediaId"]; got != id {
				t.Errorf("message names media %q, want %q", got, id)
			}
			for k, v := range tt.param {
				if p[k] != v {
					t.Errorf("msgParam %s = %q, want %q", k, p[k], v)
				}
			}
		})
	}
	gatewaytest.WaitDelivered(t, h.Bus, dingtalk.Channel, 1, wait)
	h.fake.None(t, "webhook", "otosend", "groupsend", "upload")
}

// TestRedeliveryAfterALostAckSendsNothingTwice: DingTalk has no
// idempotency key, so each piece DingTalk took is recorded fleet-wide
// before the next starts. Gateway A is cut off between DingTalk taking a
// piece and the ack; the reply is then redelivered to gateway B (another
// adapter on the same bus), which must send only what A did not: in all,
// each piece reaches DingTalk exactly once.
func TestRedeliveryAfterALostAckSendsNothingTwice(t *testing.T) {
	first, second := strings.Repeat("one ", 900), strings.Repeat("two ", 900) // two pieces at dingtalk.Limit
	hold := make(chan struct{})
	tests := []struct {
		name    string
		content string
		// fail is what the fake answers A's sends with, set before A
		// starts (set after, A's first send could come first).
		fail func() []dingtalktest.Failure
		// cut stops A's delivery (its context is cancel) where the test
		// wants it; it returns after the fake saw A's sends.
		cut func(t *testing.T, fake *dingtalktest.Server, cancel func())
		// wantA is whether A's Deliver succeeds; resent what B sends.
		wantA  bool
		resent []string
	}{
		{
			name: "stopped while DingTalk answers", content: "just once", wantA: true,
			fail: func() []dingtalktest.Failure { return []dingtalktest.Failure{{Hold: hold}} },
			cut: func(t *testing.T, fake *dingtalktest.Server, cancel func()) {
				fake.Next(t, wait, "otosend") // DingTalk has it; its answer is held
				cancel()                      // the gateway stops
				close(hold)
			},
		},
		{
			name: "failed after the first piece", content: first + "\n\n" + second, resent: []string{strings.TrimSpace(second)},
			fail: func() []dingtalktest.Failure {
				return []dingtalktest.Failure{{Hold: closed()}, {Status: 500, Code: "ServiceUnavailable"}}
			},
			cut: func(t *testing.T, fake *dingtalktest.Server, cancel func()) {
				fake.Next(t, wait, "otosend")
				fake.Next(t, wait, "otosend")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := dingtalktest.New(t)
			b := bustest.StartJetStream(t, gateway.Assets, access.Assets)
			gate, err := access.Open(t.Context(), b)
			if err != nil {
				t.Fatal(err)
			}
			cfg := dingtalk.Config{ClientID: dingtalktest.ClientID, ClientSecret: dingtalktest.ClientSecret, APIURL: fake.URL}
			cfg.Enabled = true
			adapter := func() *dingtalk.Adapter {
				a, err := dingtalk.New(t.Context(), cfg, dingtalk.Deps{Bus: b, Gate: gate})
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			msg := &nanofleetv1.OutboundMessage{Id: "17:0", Channel: dingtalk.Channel, ChatId: "staff-ada", Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, Content: tt.content}

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			fake.Fail("otosend", tt.fail()...)
			go func() { done <- adapter().Deliver(ctx, msg) }()
			tt.cut(t, fake, cancel)
			select {
			case err := <-done:
				de, _ := err.(*gateway.DeliveryError)
				if tt.wantA && err != nil || !tt.wantA && (de == nil || !de.Retryable) {
					t.Fatalf("gateway A's delivery: %v (want success: %v, else a retry)", err, tt.wantA)
				}
			case <-time.After(wait):
				t.Fatal("gateway A's delivery did not end")
			}

			if err := adapter().Deliver(t.Context(), msg); err != nil {
				t.Fatalf("gateway B's delivery: %v", err)
			}
			for _, want := range tt.resent {
				if _, text := fake.Next(t, wait, "otosend").Markdown(); text != want {
					t.Errorf("B sent %.20q…, want %.20q…", text, want)
				}
			}
			fake.None(t, "otosend", "groupsend", "webhook") // B's delivery has returned
		})
	}
}

func closed() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// TestStreamingUpdatesOneCard: with streaming and a card template, the
// answer appears in one AI card created at the first delta, updated at
// most once per streamEditInterval and finally holding the whole answer,
// which is then not sent again. An update answered with a rate limit
// (429, Retry-After) is made again once the wait has passed, and the
// stream goes on; when updates fail, the answer is sent whole as usual.
func TestStreamingUpdatesOneCard(t *testing.T) {
	var deltas []string
	for i := range 24 {
		deltas = append(deltas, fmt.Sprintf("word%d ", i))
	}
	answer := strings.Join(deltas, "") + "(end)" // more than the deltas: the last update is never skipped
	const retryAfter = 2                         // seconds, longer than the interval
	tests := []struct {
		name string
		fail *dingtalktest.Failure // the first update's answer
		// limited is the wait the first update's failure asks for; the
		// stream goes on after it. Any other failure ends the stream.
		limited time.Duration
	}{
		{"updates", nil, 0},
		{"update rate limited", &dingtalktest.Failure{Status: 429, RetryAfter: retryAfter, Code: "Forbidden.AccessDenied.QpsLimitForApi"}, retryAfter * time.Second},
		{"updates failing", &dingtalktest.Failure{Status: 400, Code: "param.invalid"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The final answer waits until the card is up, as a model
			// writes for a while (published at once, it may reach the
			// delivery before the deltas reach the stream, and is then
			// rightly sent whole).
			posted := make(chan struct{})
			cfg := dingtalk.Config{CardTemplateID: "tpl.schema"}
			// The streams wait on a fake clock that the fake stamps its
			// calls with: the updates' stamps are apart by the waits made
			// between them, however late the test reads them.
			const interval = 200 * time.Millisecond
			cfg.AllowFrom, cfg.Streaming, cfg.StreamEditInterval = []string{"*"}, true, interval.Seconds()
			h := startPaced(t, cfg, adaptertest.NewClock(), workertest.Streamed(answer, deltas...), workertest.HoldUntil(posted, wait))
			failing := tt.fail != nil && tt.limited == 0
			if tt.fail != nil {
				h.fake.Fail("cardstream", *tt.fail)
			}
			h.fake.Send(t, dm("msg-1", "staff-ada", "stream please"))
			card := h.fake.Next(t, wait, "cardcreate", "webhook", "otosend")
			close(posted)
			id := card.Str("outTrackId")
			if card.Kind != "cardcreate" || card.Str("cardTemplateId") != "tpl.schema" || card.Str("openSpaceId") != "dtv1.card//IM_ROBOT.staff-ada" || !strings.HasPrefix(answer, h.fake.Card(id)) {
				t.Fatalf("first call %s to %q, card %q", card.Kind, card.Str("openSpaceId"), h.fake.Card(id))
			}
			if failing {
				c := h.fake.Next(t, wait, "webhook", "otosend", "cardcreate")
				if _, text := c.Markdown(); c.Kind != "webhook" || text != answer {
					t.Errorf("after a failed update: %s %.30q…, want the whole answer by webhook", c.Kind, text)
				}
				return
			}
			last := card.At
			var update dingtalktest.Call
			updates := 0
			for h.fake.Card(id) != answer {
				update = h.fake.Next(t, wait, "cardstream", "webhook", "otosend", "cardcreate")
				if update.Kind != "cardstream" || update.Str("outTrackId") != id {
					t.Fatalf("%s call during the stream: %v", update.Kind, update.Body)
				}
				updates++
				if gap := update.At.Sub(last); gap < interval {
					t.Errorf("two updates %s apart, interval %s", gap, interval)
				}
				if gap := update.At.Sub(last); updates == 2 && gap < tt.limited {
					t.Errorf("update after the rate limit came %s after it, want at least %s", gap, tt.limited)
				}
				last = update.At
			}
			if tt.limited > 0 && updates < 2 {
				t.Errorf("the card was updated %d times, want the rate-limited update made again", updates)
			}
			if update.Kind == "" || update.Body["isFinalize"] != true {
				t.Errorf("last update %v, want one finalizing the card", update.Body)
			}
			gatewaytest.WaitDelivered(t, h.Bus, dingtalk.Channel, 1, wait)
			h.fake.None(t, "webhook", "otosend", "groupsend", "cardcreate")
		})
	}
}

// TestLiveMessagesWithinLimit: progress and tool hints go out as one text
// message each, cut to Limit: the model's text is not bounded.
func TestLiveMessagesWithinLimit(t *testing.T) {
	cases := adaptertest.LiveCases(dingtalk.Limit)
	yes := true
	h := start(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, SendProgress: &yes, SendToolHints: &yes}}, adaptertest.LiveScript(cases))
	for i, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			h.fake.Send(t, dm(fmt.Sprintf("msg-live-%d", i), "staff-ada", strconv.Itoa(i)))
			c := h.fake.Next(t, wait, "webhook", "otosend")
			text, _ := c.Body["text"].(map[string]any)
			got, _ := text["content"].(string)
			if c.Str("msgtype") != "text" || got != tt.Want {
				t.Errorf("sent %s of %d units ending %q; want text of %d units ending %q", c.Str("msgtype"), markup.Len(got), adaptertest.Tail(got), markup.Len(tt.Want), adaptertest.Tail(tt.Want))
			}
		})
	}
}
