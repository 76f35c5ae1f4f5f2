package dingtalk_test

import (
	"context"
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
	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk/dingtalktest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

const wait = 10 * time.Second

type harness struct {
	fake   *dingtalktest.Server
	logs   *gatewaytest.Logs
	bus    *bus.Bus
	worker *workertest.Worker
}

func start(t *testing.T, cfg dingtalk.Config, script workertest.Script, opts ...workertest.Option) *harness {
	t.Helper()
	h := &harness{fake: dingtalktest.New(t), bus: bustest.StartJetStream(t, channels.Assets)}
	h.worker = workertest.Start(t, h.bus, script, opts...)
	h.gateway(t, cfg)
	h.fake.WaitConnected(t, wait)
	return h
}

// gateway runs one more gateway with a DingTalk adapter for cfg on the
// harness's bus and fake; it stops when stop is called or the test ends.
// status returns the status board's record of the channel.
func (h *harness) status(t *testing.T) *status.Record {
	t.Helper()
	board, err := status.Open(t.Context(), h.bus)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := board.Get(t.Context(), dingtalk.Channel)
	if err != nil || rec == nil {
		t.Fatalf("status record: %v, %v", rec, err)
	}
	return rec
}

func (h *harness) gateway(t *testing.T, cfg dingtalk.Config) (stop func()) {
	t.Helper()
	if h.logs == nil {
		h.logs = &gatewaytest.Logs{}
	}
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Enabled, cfg.ClientID, cfg.ClientSecret, cfg.APIURL = true, dingtalktest.ClientID, dingtalktest.ClientSecret, h.fake.URL
	return gatewaytest.Run(t, h.bus, log, func(ctx context.Context, gate *access.Gate, log *slog.Logger) (gateway.Adapter, error) {
		return dingtalk.New(ctx, cfg, dingtalk.Deps{Bus: h.bus, Gate: gate}, dingtalk.WithLogger(log))
	})
}

func (h *harness) inboundUntil(t *testing.T, last string) []string {
	t.Helper()
	return h.worker.ContentsUntil(t, last, wait)
}

// replies collects the markdown texts of the next n messages sent by
// any API.
func (h *harness) replies(t *testing.T, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		_, text := h.fake.Next(t, wait, "webhook", "otosend", "groupsend").Markdown()
		got[text]++
	}
	return got
}

func dm(id, staff, text string) dingtalktest.Message {
	return dingtalktest.Message{MsgID: id, StaffID: staff, Nick: staff, ConversationID: "cid-dm-" + staff, Text: text}
}

func group(id, staff, text string, at bool) dingtalktest.Message {
	return dingtalktest.Message{MsgID: id, StaffID: staff, Nick: staff, ConversationID: "cidGroup1", Group: true, AtBot: at, Text: text}
}

func TestDirectMessage(t *testing.T) {
	h := start(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"staff-ada"}}}, func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{workertest.Final("## Hi\n\n**hello** " + in.GetContent())}
	})
	frame := h.fake.Send(t, dm("msg-1", "staff-ada", " hello "))
	if ack := h.fake.WaitAck(t, frame, wait); ack.Code != 200 {
		t.Errorf("frame acknowledged with %d", ack.Code)
	}
	c := h.fake.Next(t, wait, "webhook", "otosend", "groupsend")
	title, text := c.Markdown()
	if c.Kind != "webhook" || c.Str("msgtype") != "markdown" || text != "## Hi\n\n**hello** hello" || title != "Hi" || c.Expired {
		t.Errorf("reply = %+v", c)
	}
	in := <-h.worker.Inbound
	if in.GetId() != "msg-1" || in.GetChatId() != "staff-ada" || in.GetSenderId() != "staff-ada" || in.GetMetadata()["conversation_id"] != "cid-dm-staff-ada" {
		t.Errorf("inbound = %v", in)
	}
}

func TestExpiredSessionWebhookFallsBackToTheRobotAPI(t *testing.T) {
	tests := []struct {
		name  string
		msg   dingtalktest.Message
		kind  string
		check func(*testing.T, dingtalktest.Call)
	}{
		{"one-to-one", dm("msg-1", "staff-ada", "hi"), "otosend", func(t *testing.T, c dingtalktest.Call) {
			if ids, _ := c.Body["userIds"].([]any); len(ids) != 1 || ids[0] != "staff-ada" {
				t.Errorf("userIds = %v", c.Body["userIds"])
			}
		}},
		{"group", group("msg-2", "staff-ada", "hi", true), "groupsend", func(t *testing.T, c dingtalktest.Call) {
			if c.Str("openConversationId") != "cidGroup1" {
				t.Errorf("openConversationId = %q", c.Str("openConversationId"))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
			tt.msg.WebhookTTL = -time.Minute
			h.fake.Send(t, tt.msg)
			c := h.fake.Next(t, wait, "webhook", "otosend", "groupsend")
			if c.Kind != tt.kind || c.Str("robotCode") != dingtalktest.ClientID || c.Str("msgKey") != "sampleMarkdown" {
				t.Fatalf("sent by %s: %+v", c.Kind, c)
			}
			if _, text := c.Markdown(); text != "echo: hi" {
				t.Errorf("text = %q", text)
			}
			tt.check(t, c)
		})
	}
}

func TestRefusedSessionWebhookFallsBackToTheRobotAPI(t *testing.T) {
	h := start(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	// The platform ended the session before the time it announced.
	h.fake.Fail("webhook", dingtalktest.Failure{ErrCode: 300001})
	h.fake.Send(t, dm("msg-1", "staff-ada", "hi"))
	if c := h.fake.Next(t, wait, "webhook", "otosend"); c.Kind != "webhook" {
		t.Fatalf("first try by %s", c.Kind)
	}
	c := h.fake.Next(t, wait, "webhook", "otosend")
	if _, text := c.Markdown(); c.Kind != "otosend" || text != "echo: hi" {
		t.Errorf("fallback = %+v", c)
	}
}

func TestGroupPolicy(t *testing.T) {
	tests := []struct {
		name  string
		cfg   dingtalk.Config
		at    bool
		reply bool
	}{
		{"mention needed", dingtalk.Config{}, false, false},
		{"mentioned", dingtalk.Config{}, true, true},
		{"open", dingtalk.Config{Common: channelconfig.Common{GroupPolicy: dingtalk.GroupOpen}}, false, true},
		{"allowlisted group", dingtalk.Config{Common: channelconfig.Common{GroupPolicy: dingtalk.GroupAllowlist, GroupAllowFrom: []string{"cidGroup1"}}}, false, true},
		{"other group", dingtalk.Config{Common: channelconfig.Common{GroupPolicy: dingtalk.GroupAllowlist, GroupAllowFrom: []string{"cidOther"}}}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.AllowFrom = []string{"*"}
			h := start(t, tt.cfg, workertest.Echo)
			h.fake.Send(t, group("msg-1", "staff-ada", "chatter", tt.at))
			h.fake.Send(t, dm("msg-2", "staff-ada", "sentinel"))
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

func TestRateLimitIsHonoured(t *testing.T) {
	tests := []struct {
		name    string
		kind    string
		failure dingtalktest.Failure
		ttl     time.Duration
		wait    time.Duration
	}{
		{"robot API 429 with Retry-After", "otosend", dingtalktest.Failure{Status: 429, RetryAfter: 1, Code: "Forbidden.AccessDenied.QpsLimitForApi"}, -time.Minute, time.Second},
		{"session webhook sending too fast", "webhook", dingtalktest.Failure{ErrCode: 130101}, time.Hour, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
			h.fake.Fail(tt.kind, tt.failure)
			h.fake.Send(t, dingtalktest.Message{MsgID: "msg-1", StaffID: "staff-ada", ConversationID: "cid-dm", Text: "hi", WebhookTTL: tt.ttl})
			h.fake.Next(t, wait, tt.kind)
			at := time.Now()
			c := h.fake.Next(t, wait, tt.kind)
			if d := time.Since(at); d < tt.wait-100*time.Millisecond {
				t.Errorf("retried after %s, want at least %s", d, tt.wait)
			}
			if _, text := c.Markdown(); text != "echo: hi" {
				t.Errorf("retry text = %q", text)
			}
		})
	}
}

func TestRepeatedMessageYieldsOneReply(t *testing.T) {
	h := start(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	f1 := h.fake.Send(t, dm("msg-same", "staff-ada", "once"))
	f2 := h.fake.Send(t, dm("msg-same", "staff-ada", "once")) // resent after a lost ACK
	h.fake.WaitAck(t, f1, wait)
	h.fake.WaitAck(t, f2, wait)
	h.fake.Send(t, dm("msg-next", "staff-ada", "sentinel"))
	if got := h.inboundUntil(t, "sentinel"); len(got) != 2 {
		t.Errorf("worker got %q, want the repeated message once", got)
	}
	if got := h.replies(t, 2); got["echo: once"] != 1 || got["echo: sentinel"] != 1 {
		t.Errorf("replies = %v", got)
	}
}

func TestLongAnswerIsSplitOnParagraphs(t *testing.T) {
	var paras []string
	for i := range 40 {
		paras = append(paras, strings.Repeat("word ", 40)+strings.Repeat("x", 1+i%5))
	}
	answer := strings.Join(paras, "\n\n") // about 8100 characters
	h := start(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{workertest.Final(answer)}
	})
	h.fake.Send(t, dm("msg-1", "staff-ada", "long please"))
	var pieces []string
	for len(pieces) < 3 {
		_, text := h.fake.Next(t, wait, "webhook").Markdown()
		if len(text) > dingtalk.Limit {
			t.Errorf("piece of %d characters", len(text))
		}
		pieces = append(pieces, text)
	}
	if got := strings.Join(pieces, "\n\n"); got != answer {
		t.Errorf("pieces do not rejoin into the answer on paragraph boundaries (%d vs %d chars)", len(got), len(answer))
	}
}

var codeRE = regexp.MustCompile(`\b[A-HJ-NP-Z2-9]{8}\b`)

func TestStrangers(t *testing.T) {
	h := start(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"staff-owner"}}}, workertest.Echo)
	h.fake.Send(t, group("msg-1", "staff-x", "hi", true))
	h.fake.Send(t, dm("msg-2", "staff-x", "hi"))
	// The pairing code carries no session webhook: it goes by the robot
	// API to the stranger.
	c := h.fake.Next(t, wait, "webhook", "otosend", "groupsend")
	_, text := c.Markdown()
	if ids, _ := c.Body["userIds"].([]any); c.Kind != "otosend" || len(ids) != 1 || ids[0] != "staff-x" || codeRE.FindString(text) == "" {
		t.Fatalf("want a pairing code to staff-x, got %+v", c)
	}
	h.fake.Send(t, dm("msg-3", "staff-owner", "sentinel"))
	if got := h.inboundUntil(t, "sentinel"); len(got) != 1 {
		t.Errorf("worker got %q: a stranger's message was published", got)
	}
}

func TestMalformedFramesAreDropped(t *testing.T) {
	h := start(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.Raw(t, []byte("not json"))
	for _, data := range []string{`not json`, `{"msgId":"m1"}`, `{"msgId":"m2","conversationId":"c","senderStaffId":"s","conversationType":"9"}`} {
		if ack := h.fake.WaitAck(t, h.fake.Frame(t, "CALLBACK", "/v1.0/im/bot/messages/get", data), wait); ack.Code != 200 {
			t.Errorf("malformed message %q acknowledged %d, want 200 so it is not sent again", data, ack.Code)
		}
	}
	if ack := h.fake.WaitAck(t, h.fake.Frame(t, "EVENT", "chat_update", `{}`), wait); ack.Code != 404 {
		t.Errorf("unsubscribed event acknowledged %d, want 404", ack.Code)
	}
	ping := h.fake.Frame(t, "SYSTEM", "ping", `{"opaque":"p1"}`)
	if ack := h.fake.WaitAck(t, ping, wait); ack.Code != 200 || ack.Data != `{"opaque":"p1"}` {
		t.Errorf("ping answered %+v", ack)
	}
	h.fake.Send(t, dm("msg-ok", "staff-ada", "still there?"))
	if got := h.replies(t, 1); got["echo: still there?"] != 1 {
		t.Errorf("replies = %v", got)
	}
	if n := h.fake.Connections(); n != 1 {
		t.Errorf("%d connections: a malformed frame broke the connection", n)
	}
	// The raw frame, the undecodable message and the two without fields.
	if n := h.logs.Count("dropping malformed DingTalk") + h.logs.Count("dropping DingTalk robot message without"); n != 4 {
		t.Errorf("%d drop lines logged, want 4:\n%s", n, h.logs)
	}
}

func TestDisconnectReconnects(t *testing.T) {
	h := start(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.Frame(t, "SYSTEM", "disconnect", `{"reason":"upgrade"}`)
	h.fake.WaitConnections(t, 2, wait)
	h.fake.Send(t, dm("msg-1", "staff-ada", "after"))
	if got := h.replies(t, 1); got["echo: after"] != 1 {
		t.Errorf("replies = %v", got)
	}
}

func TestPicturesAndFilesAreStored(t *testing.T) {
	h := start(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.AddFile("dl-pic", []byte("\x89PNG\r\n\x1a\nfake"))
	h.fake.AddFile("dl-doc", []byte("%PDF-1.4 fake"))
	m := dm("msg-1", "staff-ada", "")
	m.Type, m.Content = "picture", map[string]any{"downloadCode": "dl-pic"}
	h.fake.Send(t, m)
	m = dm("msg-2", "staff-ada", "")
	m.Type, m.Content = "file", map[string]any{"downloadCode": "dl-doc", "fileName": "report.pdf"}
	h.fake.Send(t, m)
	blobs, err := h.bus.Blobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ data, mime string }{{"\x89PNG\r\n\x1a\nfake", "image/png"}, {"%PDF-1.4 fake", "application/pdf"}} {
		select {
		case in := <-h.worker.Inbound:
			if len(in.GetMedia()) != 1 {
				t.Fatalf("message %d media = %v", i, in.GetMedia())
			}
			ref := in.GetMedia()[0]
			data, err := blobs.GetBytes(t.Context(), ref.GetObject())
			if err != nil || string(data) != want.data || ref.GetMimeType() != want.mime {
				t.Errorf("message %d: stored %q (%s), %v", i, data, ref.GetMimeType(), err)
			}
		case <-time.After(wait):
			t.Fatal("no inbound message")
		}
	}
}

// TestOneConnectionPerApp: a second gateway waits while the first holds
// the app's stream, and takes over when the first stops.
func TestOneConnectionPerApp(t *testing.T) {
	h := &harness{fake: dingtalktest.New(t), bus: bustest.StartJetStream(t, channels.Assets)}
	h.worker = workertest.Start(t, h.bus, workertest.Echo)
	stopFirst := h.gateway(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}})
	h.fake.WaitConnected(t, wait)
	// The status is written before the connection is made.
	if rec := h.status(t); rec.Account != dingtalktest.ClientID || rec.State != status.Connected {
		t.Errorf("status = %+v, want connected as the robot code, %s", rec, dingtalktest.ClientID)
	}
	h.gateway(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}})
	h.fake.Send(t, dm("msg-1", "staff-ada", "first"))
	if got := h.replies(t, 1); got["echo: first"] != 1 {
		t.Errorf("replies = %v", got)
	}
	if n := h.fake.Connections(); n != 1 {
		t.Errorf("%d stream connections for one app, want 1", n)
	}
	// Stopped before it recorded the delivery, the first gateway would
	// leave the reply to be sent again (DingTalk has no idempotency key).
	h.waitDelivered(t, 1)
	stopFirst()
	h.fake.WaitConnections(t, 2, wait) // the lease TTL in tests is 3s
	h.fake.Send(t, dm("msg-2", "staff-ada", "second"))
	if got := h.replies(t, 1); got["echo: second"] != 1 {
		t.Errorf("replies = %v", got)
	}
}

// waitDelivered waits until n replies are recorded as delivered.
func (h *harness) waitDelivered(t *testing.T, n int) {
	t.Helper()
	kv, err := h.bus.JS.KeyValue(t.Context(), h.bus.Space.Bucket("delivered"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.WatchAll(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	seen := 0
	for seen < n {
		select {
		case e := <-w.Updates():
			if e != nil {
				seen++
			}
		case <-time.After(wait):
			t.Fatalf("%d replies recorded as delivered, want %d", seen, n)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := dingtalk.Config{Common: channelconfig.Common{Enabled: true}, ClientID: "ding1", ClientSecret: "s"}
	tests := []struct {
		name   string
		change func(*dingtalk.Config)
		key    string
	}{
		{"valid", func(*dingtalk.Config) {}, ""},
		{"disabled needs nothing", func(c *dingtalk.Config) { *c = dingtalk.Config{} }, ""},
		{"client id", func(c *dingtalk.Config) { c.ClientID = "" }, "channels.dingtalk.clientId"},
		{"client secret", func(c *dingtalk.Config) { c.ClientSecret = "" }, "channels.dingtalk.clientSecret"},
		{"group policy", func(c *dingtalk.Config) { c.GroupPolicy = "all" }, "channels.dingtalk.groupPolicy"},
		{"allowlist without groups", func(c *dingtalk.Config) { c.GroupPolicy = dingtalk.GroupAllowlist }, "channels.dingtalk.groupAllowFrom"},
		{"dm policy", func(c *dingtalk.Config) { c.DMPolicy = "maybe" }, "channels.dingtalk.dmPolicy"},
		{"api url", func(c *dingtalk.Config) { c.APIURL = "api.dingtalk.com" }, "channels.dingtalk.apiUrl"},
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

func TestRejectedCredentialsStopTheAdapter(t *testing.T) {
	fake := dingtalktest.New(t)
	b := bustest.StartJetStream(t, channels.Assets)
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	gate, err := access.Open(ctx, b, access.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	cfg := dingtalk.Config{Common: channelconfig.Common{Enabled: true}, ClientID: dingtalktest.ClientID, ClientSecret: "wrong", APIURL: fake.URL}
	a, err := dingtalk.New(ctx, cfg, dingtalk.Deps{Bus: b, Gate: gate}, dingtalk.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(ctx, gateway.InboxFunc(func(context.Context, *nanofleetv1.InboundMessage) error { return nil }))
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "rejected") {
		t.Errorf("Run = %v, want the credentials refused before the deadline", err)
	}
}
