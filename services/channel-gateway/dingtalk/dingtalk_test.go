package dingtalk_test

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk/dingtalktest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
)

const wait = 10 * time.Second

type harness struct {
	adaptertest.Env
	fake *dingtalktest.Server
}

func start(t *testing.T, cfg dingtalk.Config, script workertest.Script, opts ...workertest.Option) *harness {
	t.Helper()
	h := &harness{Env: adaptertest.NewEnv(t, script, opts...), fake: dingtalktest.New(t)}
	h.gateway(t, cfg)
	h.fake.WaitConnected(t, wait)
	return h
}

// startPaced is start with the adapter's streams paced by clock, which
// also stamps the fake's calls.
func startPaced(t *testing.T, cfg dingtalk.Config, clock *adaptertest.Clock, script workertest.Script, opts ...workertest.Option) *harness {
	t.Helper()
	h := &harness{Env: adaptertest.NewEnv(t, script, opts...), fake: dingtalktest.New(t)}
	h.fake.SetClock(clock.Now)
	runAdapter(t, h.Bus, h.fake, cfg, slog.New(slog.DiscardHandler), dingtalk.WithStreamClock(clock))
	h.fake.WaitConnected(t, wait)
	return h
}

// gateway runs one more gateway with a DingTalk adapter for cfg on the
// harness's bus and fake; it stops when stop is called or the test ends.
func (h *harness) gateway(t *testing.T, cfg dingtalk.Config) (stop func()) {
	t.Helper()
	return runAdapter(t, h.Bus, h.fake, cfg, slog.New(slog.DiscardHandler))
}

// runAdapter runs a gateway on b with a DingTalk adapter for cfg against
// fake; stop stops it.
func runAdapter(t *testing.T, b *bus.Bus, fake *dingtalktest.Server, cfg dingtalk.Config, log *slog.Logger, opts ...dingtalk.Option) (stop func()) {
	t.Helper()
	cfg.Enabled, cfg.ClientID, cfg.ClientSecret, cfg.APIURL = true, dingtalktest.ClientID, dingtalktest.ClientSecret, fake.URL
	return gatewaytest.Run(t, b, log, func(ctx context.Context, deps adapterdeps.Deps, log *slog.Logger) (gateway.Adapter, error) {
		return dingtalk.New(ctx, cfg, deps, append([]dingtalk.Option{dingtalk.WithLogger(log)}, opts...)...)
	})
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
	in := h.Worker.Next(t)
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

// TestRateLimitIsHonoured: the robot API's 429 (the session webhook's
// "sending too fast" is adaptertest's RateLimitWaitedOut).
func TestRateLimitIsHonoured(t *testing.T) {
	tests := []struct {
		name    string
		kind    string
		failure dingtalktest.Failure
		ttl     time.Duration
		wait    time.Duration
	}{
		{"robot API 429 with Retry-After", "otosend", dingtalktest.Failure{Status: 429, RetryAfter: 1, Code: "Forbidden.AccessDenied.QpsLimitForApi"}, -time.Minute, time.Second},
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

var codeRE = regexp.MustCompile(`\b[A-HJ-NP-Z2-9]{8}\b`)

// TestPairingCodeByTheRobotAPI: the pairing code carries no session
// webhook: it goes by the robot API to the stranger (adaptertest's
// Strangers covers the rest).
func TestPairingCodeByTheRobotAPI(t *testing.T) {
	h := start(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"staff-owner"}}}, workertest.Echo)
	h.fake.Send(t, dm("msg-2", "staff-x", "hi"))
	c := h.fake.Next(t, wait, "webhook", "otosend", "groupsend")
	_, text := c.Markdown()
	if ids, _ := c.Body["userIds"].([]any); c.Kind != "otosend" || len(ids) != 1 || ids[0] != "staff-x" || codeRE.FindString(text) == "" {
		t.Fatalf("want a pairing code to staff-x, got %+v", c)
	}
}

func TestDisconnectReconnects(t *testing.T) {
	h := start(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.Frame(t, "SYSTEM", "disconnect", `{"reason":"upgrade"}`)
	h.fake.WaitConnections(t, 2, wait)
	h.fake.Send(t, dm("msg-1", "staff-ada", "after"))
	if got := adaptertest.Texts(t, &suiteFake{Server: h.fake}, 1); got["echo: after"] != 1 {
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
	for i, want := range []struct{ data, mime string }{{"\x89PNG\r\n\x1a\nfake", "image/png"}, {"%PDF-1.4 fake", "application/pdf"}} {
		ref, data := adaptertest.Stored(t, h.Bus, h.Worker.Next(t))
		if string(data) != want.data || ref.GetMimeType() != want.mime {
			t.Errorf("message %d: stored %q (%s)", i, data, ref.GetMimeType())
		}
	}
}

// TestOneConnectionPerApp: a second gateway waits while the first holds
// the app's stream, and takes over when the first stops; the status names
// the robot code.
func TestOneConnectionPerApp(t *testing.T) {
	h := &harness{Env: adaptertest.NewEnv(t, workertest.Echo), fake: dingtalktest.New(t)}
	run := func() func() {
		return h.gateway(t, dingtalk.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}})
	}
	adaptertest.OneConnection(t, h.Bus, h.fake, dingtalk.Channel, dingtalktest.ClientID, run, func(t *testing.T, n int, text string) {
		h.fake.Send(t, dm(fmt.Sprintf("msg-%d", n), "staff-ada", text))
		if got := adaptertest.Texts(t, &suiteFake{Server: h.fake}, 1); got["echo: "+text] != 1 {
			t.Errorf("replies = %v", got)
		}
		// Stopped before it recorded the delivery, a gateway would leave
		// the reply to be sent again (DingTalk has no idempotency key).
		gatewaytest.WaitDelivered(t, h.Bus, dingtalk.Channel, n, wait)
	})
}

func TestValidate(t *testing.T) {
	ok := dingtalk.Config{Common: channelconfig.Common{Enabled: true}, ClientID: "ding1", ClientSecret: "s"}
	own := []adaptertest.ConfigCase[dingtalk.Config]{
		{Name: "client id", Change: func(c *dingtalk.Config) { c.ClientID = "" }, Key: "channels.dingtalk.clientId"},
		{Name: "client secret", Change: func(c *dingtalk.Config) { c.ClientSecret = "" }, Key: "channels.dingtalk.clientSecret"},
		{Name: "dm policy", Change: func(c *dingtalk.Config) { c.DMPolicy = "maybe" }, Key: "channels.dingtalk.dmPolicy"},
		{Name: "api url", Change: func(c *dingtalk.Config) { c.APIURL = "api.dingtalk.com" }, Key: "channels.dingtalk.apiUrl"},
	}
	common := func(c *dingtalk.Config) *channelconfig.Common { return &c.Common }
	adaptertest.Validate(t, ok, append(adaptertest.CommonConfigCases("dingtalk", common), own...))
}

func TestRejectedCredentialsStopTheAdapter(t *testing.T) {
	fake := dingtalktest.New(t)
	cfg := dingtalk.Config{Common: channelconfig.Common{Enabled: true}, ClientID: dingtalktest.ClientID, ClientSecret: "wrong", APIURL: fake.URL}
	adaptertest.Refused(t, "rejected", func(ctx context.Context, b *bus.Bus, gate *access.Gate, log *slog.Logger) (gateway.Adapter, error) {
		return dingtalk.New(ctx, cfg, dingtalk.Deps{Bus: b, Gate: gate}, dingtalk.WithLogger(log))
	})
}

// TestAdapter runs the scenarios every adapter passes.
func TestAdapter(t *testing.T) {
	adaptertest.Run(t, adaptertest.Platform{Limit: dingtalk.Limit, Group: "cidGroup1", Allowlist: true, Start: startSuite})
}

// users are the scenarios' users as DingTalk staff ids.
var users = map[string]string{adaptertest.Owner: "staff-owner", adaptertest.Stranger: "staff-x", adaptertest.Alice: "staff-ada"}

type suiteFake struct {
	*dingtalktest.Server
	// sessions are the chats of the session webhooks, which the fake
	// numbers from 1 in the order of the messages sent.
	sessions []string
	// refuse says of each next webhook call whether to mark it refused:
	// the fake records refused calls as any other.
	refuse []bool
	*adaptertest.Restarter
}

func (f *suiteFake) send(t *testing.T, m dingtalktest.Message, chat string) {
	f.sessions = append(f.sessions, chat)
	f.Send(t, m)
}

func (f *suiteFake) DM(t *testing.T, n int, user, text string) (id, chat string) {
	id = fmt.Sprintf("msg-%d", n)
	f.send(t, dm(id, users[user], text), users[user])
	return id, users[user]
}

func (f *suiteFake) Group(t *testing.T, n int, user, text string, mention bool) {
	f.send(t, group(fmt.Sprintf("msg-%d", n), users[user], text, mention), "cidGroup1")
}

func (f *suiteFake) Next(t *testing.T) adaptertest.Sent {
	t.Helper()
	c := f.Server.Next(t, adaptertest.Wait, "webhook", "otosend", "groupsend")
	_, text := c.Markdown()
	s := adaptertest.Sent{Text: text, At: c.At}
	switch c.Kind {
	case "webhook":
		var n int
		if _, err := fmt.Sscanf(c.Session, "sess-%d", &n); err == nil && n > 0 && n <= len(f.sessions) {
			s.Chat = f.sessions[n-1]
		}
		if len(f.refuse) > 0 {
			s.Refused, f.refuse = f.refuse[0], f.refuse[1:]
		}
	case "otosend":
		if ids, _ := c.Body["userIds"].([]any); len(ids) == 1 {
			s.Chat, _ = ids[0].(string)
		}
	case "groupsend":
		s.Chat = c.Str("openConversationId")
	}
	return s
}

// RateLimit refuses the next session webhook call as sending too fast,
// which DingTalk answers without a wait: the adapter waits 3 s.
func (f *suiteFake) RateLimit(t *testing.T, after int) time.Duration {
	f.Pass("webhook", after)
	f.Fail("webhook", dingtalktest.Failure{ErrCode: 130101})
	f.refuse = append(f.refuse, append(make([]bool, after), true)...)
	return 3 * time.Second
}

// Malformed also checks the acknowledgements (200 for what is dropped,
// so that it is not sent again; 404 for an unsubscribed event; the
// ping's opaque echoed) and that none broke the connection.
func (f *suiteFake) Malformed(t *testing.T) ([]string, int) {
	f.Raw(t, []byte("not json"))
	for _, data := range []string{`not json`, `{"msgId":"m1"}`, `{"msgId":"m2","conversationId":"c","senderStaffId":"s","conversationType":"9"}`} {
		if ack := f.WaitAck(t, f.Frame(t, "CALLBACK", "/v1.0/im/bot/messages/get", data), wait); ack.Code != 200 {
			t.Errorf("malformed message %q acknowledged %d, want 200 so it is not sent again", data, ack.Code)
		}
	}
	if ack := f.WaitAck(t, f.Frame(t, "EVENT", "chat_update", `{}`), wait); ack.Code != 404 {
		t.Errorf("unsubscribed event acknowledged %d, want 404", ack.Code)
	}
	ping := f.Frame(t, "SYSTEM", "ping", `{"opaque":"p1"}`)
	if ack := f.WaitAck(t, ping, wait); ack.Code != 200 || ack.Data != `{"opaque":"p1"}` {
		t.Errorf("ping answered %+v", ack)
	}
	if n := f.Connections(); n != 1 {
		t.Errorf("%d connections: a malformed frame broke the connection", n)
	}
	// The raw frame, the undecodable message and the two without fields.
	return []string{"dropping malformed DingTalk", "dropping DingTalk robot message without"}, 4
}

// startSuite runs the adapter for a scenario.
func startSuite(t *testing.T, b *bus.Bus, common channelconfig.Common, log *slog.Logger) adaptertest.Fake {
	f := &suiteFake{Server: dingtalktest.New(t)}
	f.Restarter = adaptertest.NewConnectedRestarter(t, f.Server, func() func() {
		return runAdapter(t, b, f.Server, dingtalk.Config{Common: common}, log)
	})
	return f
}
