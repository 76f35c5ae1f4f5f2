package feishu_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu/feishutest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

const wait = 10 * time.Second

type harness struct {
	fake    *feishutest.Server
	logs    *gatewaytest.Logs
	bus     *bus.Bus
	worker  *workertest.Worker
	adapter *feishu.Adapter
}

func start(t *testing.T, cfg feishu.Config, script workertest.Script, opts ...workertest.Option) *harness {
	t.Helper()
	h := &harness{fake: feishutest.New(t), bus: bustest.StartJetStream(t, channels.Assets)}
	h.worker = workertest.Start(t, h.bus, script, opts...)
	h.adapter, _ = h.gateway(t, cfg)
	if cfg.Mode != feishu.ModeWebhook {
		h.fake.WaitConnected(t, wait)
	}
	return h
}

// gateway runs one more gateway with a Feishu adapter for cfg on the
// harness's bus and fake; it stops when stop is called or the test ends.
// status returns the status board's record of the channel.
func (h *harness) status(t *testing.T) *status.Record {
	t.Helper()
	board, err := status.Open(t.Context(), h.bus)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := board.Get(t.Context(), feishu.Channel)
	if err != nil || rec == nil {
		t.Fatalf("status record: %v, %v", rec, err)
	}
	return rec
}

func (h *harness) gateway(t *testing.T, cfg feishu.Config) (a *feishu.Adapter, stop func()) {
	t.Helper()
	if h.logs == nil {
		h.logs = &gatewaytest.Logs{}
	}
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Enabled, cfg.AppID, cfg.AppSecret, cfg.BaseURL = true, feishutest.AppID, feishutest.AppSecret, h.fake.URL
	stop = gatewaytest.Run(t, h.bus, log, func(ctx context.Context, gate *access.Gate, log *slog.Logger) (gateway.Adapter, error) {
		var err error
		a, err = feishu.New(ctx, cfg, feishu.Deps{Bus: h.bus, Gate: gate}, feishu.WithLogger(log))
		return a, err
	})
	return a, stop
}

// inboundUntil returns the contents of the messages the worker took, up
// to the one with content last.
func (h *harness) inboundUntil(t *testing.T, last string) []string {
	t.Helper()
	return h.worker.ContentsUntil(t, last, wait)
}

// markdown returns the markdown of an interactive card reply.
func markdown(t *testing.T, c feishutest.Call) string {
	t.Helper()
	if c.Str("msg_type") != "interactive" {
		t.Fatalf("msg_type = %q, want interactive", c.Str("msg_type"))
	}
	els, _ := c.Content()["elements"].([]any)
	if len(els) != 1 {
		t.Fatalf("card content = %v", c.Content())
	}
	el, _ := els[0].(map[string]any)
	if el["tag"] != "markdown" {
		t.Fatalf("card element = %v", el)
	}
	s, _ := el["content"].(string)
	return s
}

// replies collects the markdown of the next n replies the platform took
// (not counting uuid duplicates).
func (h *harness) replies(t *testing.T, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for len(got) < n || sum(got) < n {
		c := h.fake.Next(t, wait, "reply", "create")
		if !c.Duplicate {
			got[markdown(t, c)]++
		}
	}
	return got
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func TestDirectMessage(t *testing.T) {
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"ou_ada"}}}, func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{workertest.Final("**Hi** " + in.GetContent())}
	})
	frame := h.fake.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_in1", "hello"))
	if code := h.fake.WaitAck(t, frame, wait); code != 200 {
		t.Errorf("event answered with %d", code)
	}
	c := h.fake.Next(t, wait, "reply", "create")
	if c.Kind != "reply" || c.Parent != "om_in1" || markdown(t, c) != "**Hi** hello" || len(c.Str("uuid")) == 0 {
		t.Errorf("reply = %+v", c)
	}
	in := <-h.worker.Inbound
	if in.GetId() != "ev-1" || in.GetChatId() != "oc_p2p" || in.GetSenderId() != "ou_ada" || in.GetMetadata()["message_id"] != "om_in1" {
		t.Errorf("inbound = %v", in)
	}
}

func TestGroupPolicy(t *testing.T) {
	tests := []struct {
		name    string
		cfg     feishu.Config
		mention bool
		reply   bool
	}{
		{"mention needed", feishu.Config{}, false, false},
		{"mentioned", feishu.Config{}, true, true},
		{"open", feishu.Config{Common: channelconfig.Common{GroupPolicy: feishu.GroupOpen}}, false, true},
		{"allowlisted chat", feishu.Config{Common: channelconfig.Common{GroupPolicy: feishu.GroupAllowlist, GroupAllowFrom: []string{"oc_g"}}}, false, true},
		{"other chat", feishu.Config{Common: channelconfig.Common{GroupPolicy: feishu.GroupAllowlist, GroupAllowFrom: []string{"oc_h"}}}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.AllowFrom = []string{"*"}
			h := start(t, tt.cfg, workertest.Echo)
			text, mentions := "chatter", []feishutest.Mention(nil)
			if tt.mention {
				text, mentions = "@_user_1 chatter", []feishutest.Mention{feishutest.BotMention}
			}
			h.fake.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_g", "group", "om_1", text, mentions...))
			h.fake.Send(t, feishutest.Text("ev-2", "ou_ada", "oc_p2p", "p2p", "om_2", "sentinel"))
			n := 1
			if tt.reply {
				n = 2
			}
			if got := h.inboundUntil(t, "sentinel"); len(got) != n {
				t.Errorf("worker got %q", got)
			}
			got := h.replies(t, n)
			if got["echo: sentinel"] != 1 || (tt.reply && got["echo: chatter"] != 1) {
				t.Errorf("replies = %v", got)
			}
		})
	}
}

func TestMentionsOfOthersAreNamed(t *testing.T) {
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_g", "group", "om_1", "@_user_1 ask @_user_2",
		feishutest.BotMention, feishutest.Mention{Key: "@_user_2", OpenID: "ou_bob", Name: "Bob"}))
	if got := h.inboundUntil(t, "ask @Bob"); len(got) != 1 {
		t.Errorf("worker got %q", got)
	}
}

func TestRateLimitIsHonoured(t *testing.T) {
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.Fail("reply", feishutest.RateLimited(1))
	h.fake.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_1", "hi"))
	first := h.fake.Next(t, wait, "reply")
	at := time.Now()
	again := h.fake.Next(t, wait, "reply")
	if d := time.Since(at); d < 900*time.Millisecond {
		t.Errorf("retried after %s, before x-ogw-ratelimit-reset: 1", d)
	}
	if markdown(t, again) != "echo: hi" || again.Str("uuid") != first.Str("uuid") || again.Duplicate {
		t.Errorf("retry = %+v (first uuid %q)", again, first.Str("uuid"))
	}
}

func TestRepeatedEventYieldsOneReply(t *testing.T) {
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	ev := feishutest.Text("ev-same", "ou_ada", "oc_p2p", "p2p", "om_1", "once")
	f1 := h.fake.Send(t, ev)
	f2 := h.fake.Send(t, ev) // the platform sends an event again when unsure
	h.fake.WaitAck(t, f1, wait)
	h.fake.WaitAck(t, f2, wait)
	h.fake.Send(t, feishutest.Text("ev-next", "ou_ada", "oc_p2p", "p2p", "om_2", "sentinel"))
	if got := h.inboundUntil(t, "sentinel"); len(got) != 2 {
		t.Errorf("worker got %q, want the repeated event once", got)
	}
	if got := h.replies(t, 2); got["echo: once"] != 1 || got["echo: sentinel"] != 1 {
		t.Errorf("replies = %v", got)
	}
}

func TestLongAnswerIsSplitOnParagraphs(t *testing.T) {
	var paras []string
	for i := range 90 {
		paras = append(paras, strings.Repeat("word ", 40)+strings.Repeat("x", 1+i%7))
	}
	answer := strings.Join(paras, "\n\n") // about 20000 characters
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{workertest.Final(answer)}
	})
	h.fake.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_1", "long please"))
	var pieces []string
	uuids := map[string]bool{}
	for len(pieces) < 3 {
		c := h.fake.Next(t, wait, "reply")
		md := markdown(t, c)
		if len(md) > feishu.Limit {
			t.Errorf("piece of %d characters", len(md))
		}
		pieces = append(pieces, md)
		uuids[c.Str("uuid")] = true
	}
	if got := strings.Join(pieces, "\n\n"); got != answer {
		t.Errorf("pieces do not rejoin into the answer on paragraph boundaries (%d vs %d chars)", len(got), len(answer))
	}
	if len(uuids) != 3 {
		t.Errorf("pieces share uuids: %v", uuids)
	}
}

var codeRE = regexp.MustCompile(`\b[A-HJ-NP-Z2-9]{8}\b`)

func TestStrangers(t *testing.T) {
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"ou_owner"}}}, workertest.Echo)
	h.fake.Send(t, feishutest.Text("ev-1", "ou_x", "oc_g", "group", "om_1", "@_user_1 hi", feishutest.BotMention))
	h.fake.Send(t, feishutest.Text("ev-2", "ou_x", "oc_px", "p2p", "om_2", "hi"))
	c := h.fake.Next(t, wait, "reply", "create")
	text := markdown(t, c)
	if c.Kind != "create" || c.Str("receive_id") != "oc_px" || c.Query["receive_id_type"] != "chat_id" || codeRE.FindString(text) == "" {
		t.Fatalf("want a pairing code in the DM, got %+v", c)
	}
	h.fake.Send(t, feishutest.Text("ev-3", "ou_owner", "oc_po", "p2p", "om_3", "sentinel"))
	if got := h.inboundUntil(t, "sentinel"); len(got) != 1 {
		t.Errorf("worker got %q: a stranger's message was published", got)
	}
}

func TestMalformedEventsAreDropped(t *testing.T) {
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.Raw(t, []byte("not a protobuf frame at all"))
	bad := []string{
		`not json`,
		`{"schema":"2.0","header":{"event_id":"ev-x","event_type":"im.message.receive_v1"},"event":"nope"}`,
		`{"schema":"2.0","header":{"event_id":"ev-y","event_type":"im.message.receive_v1"},"event":{"message":{"chat_id":"oc_1"}}}`,
		`{"schema":"2.0","header":{"event_id":"ev-z","event_type":"im.chat.updated_v1"},"event":{}}`,
	}
	for _, p := range bad {
		if code := h.fake.WaitAck(t, h.fake.SendPayload(t, []byte(p), 1), wait); code != 200 {
			t.Errorf("malformed event %q answered %d, want 200 so it is not sent again", p, code)
		}
	}
	ev := feishutest.Message("ev-c", "ou_ada", "oc_p2p", "p2p", "om_c", "text", "not an object")
	h.fake.WaitAck(t, h.fake.Send(t, ev), wait)
	h.fake.Send(t, feishutest.Text("ev-ok", "ou_ada", "oc_p2p", "p2p", "om_ok", "still there?"))
	if got := h.replies(t, 1); got["echo: still there?"] != 1 {
		t.Errorf("replies = %v", got)
	}
	if h.fake.Connections() != 1 {
		t.Errorf("%d connections: a malformed frame broke the connection", h.fake.Connections())
	}
	// The frame, the two undecodable events and the message without ids;
	// the unknown event type is not an error.
	if n := h.logs.Count("dropping malformed Feishu frame") + h.logs.Count("dropping malformed Feishu event") +
		h.logs.Count("dropping Feishu message event without"); n != 4 {
		t.Errorf("%d drop lines logged, want 4:\n%s", n, h.logs)
	}
}

func TestEventSplitOverFrames(t *testing.T) {
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	ev := feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_1", strings.Repeat("big ", 50))
	h.fake.Send(t, ev) // warm up with the same event whole: it must be stored once
	data := []byte(`{"schema":"2.0","header":{"event_id":"ev-2","event_type":"im.message.receive_v1"},"event":{"sender":{"sender_id":{"open_id":"ou_ada"},"sender_type":"user"},"message":{"message_id":"om_2","chat_id":"oc_p2p","chat_type":"p2p","message_type":"text","content":"{\"text\":\"in three parts\"}"}}}`)
	if code := h.fake.WaitAck(t, h.fake.SendPayload(t, data, 3), wait); code != 200 {
		t.Errorf("answered %d", code)
	}
	if got := h.inboundUntil(t, "in three parts"); len(got) != 2 {
		t.Errorf("worker got %q", got)
	}
}

func TestImagesAndFilesAreStored(t *testing.T) {
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.AddResource("om_img", "img_1", []byte("\x89PNG\r\n\x1a\nfake"))
	h.fake.AddResource("om_file", "file_1", []byte("%PDF-1.4 fake"))
	h.fake.Send(t, feishutest.Message("ev-1", "ou_ada", "oc_p2p", "p2p", "om_img", "image", map[string]string{"image_key": "img_1"}))
	h.fake.Send(t, feishutest.Message("ev-2", "ou_ada", "oc_p2p", "p2p", "om_file", "file", map[string]string{"file_key": "file_1", "file_name": "report.pdf"}))
	h.fake.Send(t, feishutest.Message("ev-3", "ou_ada", "oc_p2p", "p2p", "om_post", "post", map[string]any{
		"title": "Plan", "content": [][]map[string]string{{{"tag": "text", "text": "see "}, {"tag": "a", "text": "docs", "href": "https://x.test"}}},
	}))
	blobs, err := h.bus.Blobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ data, mime string }{{"\x89PNG\r\n\x1a\nfake", "image/png"}, {"%PDF-1.4 fake", "application/pdf"}}
	for i, w := range want {
		select {
		case in := <-h.worker.Inbound:
			if len(in.GetMedia()) != 1 {
				t.Fatalf("message %d media = %v", i, in.GetMedia())
			}
			ref := in.GetMedia()[0]
			data, err := blobs.GetBytes(t.Context(), ref.GetObject())
			if err != nil || string(data) != w.data || ref.GetMimeType() != w.mime {
				t.Errorf("message %d: stored %q (%s), %v", i, data, ref.GetMimeType(), err)
			}
		case <-time.After(wait):
			t.Fatal("no inbound message")
		}
	}
	if got := h.inboundUntil(t, "Plan\nsee [docs](https://x.test)"); len(got) != 1 {
		t.Errorf("post became %q", got)
	}
	// A resource the platform no longer has: the message still arrives,
	// saying so.
	h.fake.Send(t, feishutest.Message("ev-4", "ou_ada", "oc_p2p", "p2p", "om_gone", "file", map[string]string{"file_key": "file_gone", "file_name": "gone.txt"}))
	if got := h.inboundUntil(t, "[attachment gone.txt not downloaded]"); len(got) != 1 {
		t.Errorf("worker got %q", got)
	}
}

func TestReplyFormats(t *testing.T) {
	tests := []struct {
		format, msgType string
		check           func(map[string]any) bool
	}{
		{feishu.FormatText, "text", func(c map[string]any) bool { return c["text"] == "bold and code" }},
		{feishu.FormatPost, "post", func(c map[string]any) bool {
			zh, _ := c["zh_cn"].(map[string]any)
			lines, _ := zh["content"].([]any)
			return len(lines) == 1 && strings.Contains(toJSON(lines), `"tag":"md"`) && strings.Contains(toJSON(lines), "**bold** and `code`")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}, ReplyFormat: tt.format}, func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
				return []*nanofleetv1.OutboundMessage{workertest.Final("**bold** and `code`")}
			})
			h.fake.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_1", "hi"))
			c := h.fake.Next(t, wait, "reply")
			if c.Str("msg_type") != tt.msgType || !tt.check(c.Content()) {
				t.Errorf("%s reply = %s %v", tt.format, c.Str("msg_type"), c.Content())
			}
		})
	}
}

func TestToolHints(t *testing.T) {
	yes := true
	release := make(chan struct{})
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, SendToolHints: &yes}}, func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{
			workertest.Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT, "read src/main.go"),
			workertest.Final("done"),
		}
	}, workertest.BeforeDurable(func(*nanofleetv1.OutboundMessage) {
		select {
		case <-release:
		case <-time.After(wait):
		}
	}))
	h.fake.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_1", "go"))
	hint := h.fake.Next(t, wait, "reply")
	if hint.Str("msg_type") != "text" || hint.Content()["text"] != "read src/main.go" {
		t.Errorf("hint = %v", hint.Body)
	}
	close(release)
	if md := markdown(t, h.fake.Next(t, wait, "reply")); md != "done" {
		t.Errorf("answer = %q", md)
	}
}

func TestWebhook(t *testing.T) {
	const key = webhookKey
	h, url := startWebhook(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_1", "by hook"))
	if code := feishutest.Webhook(t, url, key, feishutest.Text("ev-2", "ou_ada", "oc_p2p", "p2p", "om_2", "forged"), false); code != 401 {
		t.Errorf("badly signed webhook: %d, want 401", code)
	}
	if code := feishutest.Webhook(t, url, "wrong key", feishutest.Text("ev-3", "ou_ada", "oc_p2p", "p2p", "om_3", "garbled"), true); code != 400 && code != 401 {
		t.Errorf("webhook encrypted and signed with another key: %d, want 400 or 401", code)
	}
	if code := feishutest.Webhook(t, url, key, map[string]any{"type": "url_verification", "token": "vt", "challenge": "c1"}, false); code != 200 {
		t.Errorf("URL challenge: %d", code)
	}
	if code := feishutest.Webhook(t, url, key, map[string]any{"type": "url_verification", "token": "nope", "challenge": "c2"}, false); code != 401 {
		t.Errorf("URL challenge with a wrong token: %d, want 401", code)
	}
	if code := feishutest.Webhook(t, url, key, feishutest.Text("ev-4", "ou_ada", "oc_p2p", "p2p", "om_4", "sentinel"), true); code != 200 {
		t.Errorf("signed webhook: %d", code)
	}
	if got := h.inboundUntil(t, "sentinel"); len(got) != 2 || got[0] != "by hook" {
		t.Errorf("worker got %q, want only the signed events", got)
	}
	if got := h.replies(t, 2); got["echo: by hook"] != 1 {
		t.Errorf("replies = %v", got)
	}
}

// TestOneConnectionPerApp: a second gateway waits while the first holds
// the app's connection, and takes over when the first stops.
func TestOneConnectionPerApp(t *testing.T) {
	h := &harness{fake: feishutest.New(t), bus: bustest.StartJetStream(t, channels.Assets)}
	h.worker = workertest.Start(t, h.bus, workertest.Echo)
	cfg := feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}
	_, stopFirst := h.gateway(t, cfg)
	h.fake.WaitConnected(t, wait)
	// The status is written before the connection is made.
	if rec := h.status(t); rec.Account != "nano" || rec.State != status.Connected {
		t.Errorf("status = %+v, want connected as the app's name, nano", rec)
	}
	h.gateway(t, cfg)
	h.fake.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_1", "first"))
	h.inboundUntil(t, "first")
	if got := h.replies(t, 1); got["echo: first"] != 1 {
		t.Errorf("replies = %v", got)
	}
	if n := h.fake.Connections(); n != 1 {
		t.Errorf("%d long connections for one app, want 1", n)
	}
	stopFirst()
	h.fake.WaitConnections(t, 2, wait) // the lease TTL in tests is 3s
	h.fake.Send(t, feishutest.Text("ev-2", "ou_ada", "oc_p2p", "p2p", "om_2", "second"))
	h.inboundUntil(t, "second")
	if got := h.replies(t, 1); got["echo: second"] != 1 {
		t.Errorf("replies = %v", got)
	}
	if n := h.fake.Connections(); n != 2 {
		t.Errorf("%d long connections opened, want 2", n)
	}
}

func TestValidate(t *testing.T) {
	ok := feishu.Config{Common: channelconfig.Common{Enabled: true}, AppID: "cli_1", AppSecret: "s"}
	tests := []struct {
		name   string
		change func(*feishu.Config)
		key    string
	}{
		{"valid", func(*feishu.Config) {}, ""},
		{"disabled needs nothing", func(c *feishu.Config) { *c = feishu.Config{} }, ""},
		{"app id", func(c *feishu.Config) { c.AppID = "" }, "channels.feishu.appId"},
		{"app secret", func(c *feishu.Config) { c.AppSecret = " " }, "channels.feishu.appSecret"},
		{"domain", func(c *feishu.Config) { c.Domain = "larksuite" }, "channels.feishu.domain"},
		{"mode", func(c *feishu.Config) { c.Mode = "poll" }, "channels.feishu.mode"},
		{"webhook without encrypt key", func(c *feishu.Config) { c.Mode, c.VerificationToken = feishu.ModeWebhook, "v" }, "channels.feishu.encryptKey"},
		{"webhook without token", func(c *feishu.Config) { c.Mode, c.EncryptKey = feishu.ModeWebhook, "k" }, "channels.feishu.verificationToken"},
		{"webhook path", func(c *feishu.Config) { c.Webhook.Path = "hooks" }, "channels.feishu.webhook.path"},
		{"group policy", func(c *feishu.Config) { c.GroupPolicy = "all" }, "channels.feishu.groupPolicy"},
		{"allowlist without chats", func(c *feishu.Config) { c.GroupPolicy = feishu.GroupAllowlist }, "channels.feishu.groupAllowFrom"},
		{"dm policy", func(c *feishu.Config) { c.DMPolicy = "maybe" }, "channels.feishu.dmPolicy"},
		{"reply format", func(c *feishu.Config) { c.ReplyFormat = "html" }, "channels.feishu.replyFormat"},
		{"base url", func(c *feishu.Config) { c.BaseURL = "open.feishu.cn" }, "channels.feishu.baseUrl"},
		{"stream edit interval", func(c *feishu.Config) { c.StreamEditInterval = -1 }, "channels.feishu.streamEditInterval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.change(&c)
			err := c.Validate()
			if (err == nil) != (tt.key == "") || (err != nil && !strings.Contains(err.Error(), tt.key)) {
				t.Errorf("Validate() = %v, want error naming %q", err, tt.key)
			}
		})
	}
}

func toJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

func TestRejectedCredentialsStopTheAdapter(t *testing.T) {
	fake := feishutest.New(t)
	b := bustest.StartJetStream(t, channels.Assets)
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	gate, err := access.Open(ctx, b, access.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	// An app id of its own: the SDK caches tenant tokens process-wide by
	// app id, and other tests got one for feishutest.AppID.
	cfg := feishu.Config{Common: channelconfig.Common{Enabled: true}, AppID: "cli_rejected", AppSecret: "wrong", BaseURL: fake.URL}
	a, err := feishu.New(ctx, cfg, feishu.Deps{Bus: b, Gate: gate}, feishu.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(ctx, gateway.InboxFunc(func(context.Context, *nanofleetv1.InboundMessage) error { return nil }))
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "rejected") {
		t.Errorf("Run = %v, want the credentials refused before the deadline", err)
	}
}

// TestStreamingUpdatesOneCard: with streaming on, the answer appears in
// one card, posted at the first delta and updated as the deltas come, at
// most once per interval; the last update is the whole answer, and no
// second message repeats it. With updates failing, the answer arrives
// whole in a message of its own.
func TestStreamingUpdatesOneCard(t *testing.T) {
	words := strings.Fields(strings.Repeat("streamed words ", 12))
	// The final answer ends with more than the deltas carried, so that it
	// always takes an update, however many deltas the first post shows.
	answer := strings.Join(words, " ") + " (end)"
	script := func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		if in.GetMetadata()["stream"] != "true" {
			t.Errorf("inbound metadata %v does not ask for deltas", in.GetMetadata())
		}
		var out []*nanofleetv1.OutboundMessage
		for i, w := range words {
			if i > 0 {
				w = " " + w
			}
			out = append(out, workertest.Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, w))
		}
		return append(out, workertest.Final(answer))
	}
	tests := []struct {
		name      string
		failPatch bool
	}{
		{"updates", false},
		{"updates failing", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The answer is held back until the card is up, as a model
			// writes for a while: published right after its deltas, it can
			// reach the delivery before the deltas reach the stream, and
			// is then (correctly) sent whole.
			posted := make(chan struct{})
			h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, Streaming: true, StreamEditInterval: 0.2}}, script,
				workertest.BeforeDurable(func(*nanofleetv1.OutboundMessage) {
					select {
					case <-posted:
					case <-time.After(wait):
					}
				}))
			if tt.failPatch {
				h.fake.Fail("patch", feishutest.Failure{Status: 400, Code: 230001, Msg: "not editable"})
			}
			h.fake.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_1", "stream please"))
			first := h.fake.Next(t, wait, "reply")
			close(posted)
			if md := markdown(t, first); md == "" || !strings.HasPrefix(answer, md) {
				t.Fatalf("streamed card starts with %q", md)
			}
			if tt.failPatch {
				whole := h.fake.Next(t, wait, "reply", "create")
				if md := markdown(t, whole); md != answer {
					t.Errorf("after failed updates, message = %q, want the whole answer", md)
				}
				return
			}
			var last time.Time
			patches := 0
			for feishutest.CardText(h.fake.Content(first.ID)) != answer {
				c := h.fake.Next(t, wait, "patch", "reply", "create")
				if c.Kind != "patch" || c.Parent != first.ID {
					t.Fatalf("%s call during the stream: %+v", c.Kind, c)
				}
				patches++
				if !last.IsZero() && time.Since(last) < 150*time.Millisecond {
					t.Errorf("two updates %s apart, interval 200ms", time.Since(last))
				}
				last = time.Now()
			}
			if patches == 0 {
				t.Error("the card was never updated")
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
