package telegram_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram/telegramtest"
)

const token = "123456:TEST-token"

const wait = 10 * time.Second

type harness struct {
	fake    *telegramtest.Server
	bus     *bus.Bus
	worker  *workertest.Worker
	adapter *telegram.Adapter
}

// start runs a gateway with a Telegram adapter against a fake Bot API, and
// a fake worker answering with script.
func start(t *testing.T, cfg telegram.Config, script workertest.Script, opts ...workertest.Option) *harness {
	t.Helper()
	h := &harness{fake: telegramtest.New(t, token), bus: bustest.StartJetStream(t, channels.Assets)}
	h.worker = workertest.Start(t, h.bus, script, opts...)
	h.adapter = runAdapter(t, h.bus, h.fake, cfg, slog.New(slog.DiscardHandler))
	return h
}

func runAdapter(t *testing.T, b *bus.Bus, fake *telegramtest.Server, cfg telegram.Config, log *slog.Logger) *telegram.Adapter {
	t.Helper()
	a, cancel := runAdapterCancel(t, b, fake, cfg, log)
	_ = cancel
	return a
}

// runAdapterCancel is runAdapter with a function that stops the gateway.
func runAdapterCancel(t *testing.T, b *bus.Bus, fake *telegramtest.Server, cfg telegram.Config, log *slog.Logger) (a *telegram.Adapter, stop func()) {
	t.Helper()
	cfg.Enabled, cfg.Token, cfg.APIBase = true, token, fake.URL
	stop = gatewaytest.Run(t, b, log, func(ctx context.Context, gate *access.Gate, log *slog.Logger) (gateway.Adapter, error) {
		var err error
		a, err = telegram.New(ctx, cfg, telegram.Deps{Bus: b, Gate: gate}, telegram.WithLogger(log),
			telegram.WithPollTimeout(time.Second), telegram.WithTyping(time.Second, 5*time.Second))
		return a, err
	})
	return a, stop
}

// inboundUntil returns the contents of the messages the worker took, up
// to the one with content last. The worker takes them in the order the
// adapter published them.
func (h *harness) inboundUntil(t *testing.T, last string) []string {
	t.Helper()
	return h.worker.ContentsUntil(t, last, wait)
}

// texts collects the texts of the next n messages sent; replies to
// different messages may be delivered in either order.
func (h *harness) texts(t *testing.T, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		got[h.nextSend(t).Fields["text"]]++
	}
	return got
}

func (h *harness) nextSend(t *testing.T) telegramtest.Call {
	t.Helper()
	return h.fake.Next(t, wait, "sendMessage")
}

func (h *harness) expectText(t *testing.T, want string) telegramtest.Call {
	t.Helper()
	c := h.nextSend(t)
	if c.Fields["text"] != want {
		t.Fatalf("sendMessage text = %q, want %q", c.Fields["text"], want)
	}
	return c
}

func TestConversation(t *testing.T) {
	release := make(chan struct{})
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"42"}}}, func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{workertest.Final("**Hi** <" + in.GetContent() + ">")}
	}, workertest.BeforeDurable(func(*nanofleetv1.OutboundMessage) {
		select {
		case <-release:
		case <-time.After(wait):
		}
	}))
	h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 5, ChatID: 42, FromID: 42, Username: "alice", Text: "hello"})

	in := <-h.worker.Inbound
	if in.GetId() != "1" || in.GetChatId() != "42" || in.GetSenderId() != "42" || in.GetMetadata()["message_id"] != "5" {
		t.Errorf("inbound = %v", in)
	}
	if c := h.fake.Next(t, wait, "sendChatAction"); c.Fields["action"] != "typing" || c.Fields["chat_id"] != "42" {
		t.Errorf("chat action = %v", c.Fields) // typing while the turn runs
	}
	close(release)
	c := h.expectText(t, "<b>Hi</b> &lt;hello&gt;")
	if c.Fields["chat_id"] != "42" || c.Fields["parse_mode"] != "HTML" {
		t.Errorf("sendMessage fields = %v", c.Fields)
	}
	var rp struct {
		MessageID int `json:"message_id"`
	}
	if err := json.Unmarshal([]byte(c.Fields["reply_parameters"]), &rp); err != nil || rp.MessageID != 5 {
		t.Errorf("reply_parameters = %q, want a reply to message 5", c.Fields["reply_parameters"])
	}
}

func TestRateLimitIsHonoured(t *testing.T) {
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.Fail("sendMessage", telegramtest.TooManyRequests(1))
	h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 1, ChatID: 7, FromID: 7, Text: "x"})
	first := time.Now()
	h.nextSend(t) // answered 429
	h.expectText(t, "echo: x")
	if d := time.Since(first); d < 900*time.Millisecond {
		t.Errorf("retried after %s, before retry_after=1s", d)
	}
}

func TestRepeatedUpdateYieldsOneReply(t *testing.T) {
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	m := telegramtest.Message{UpdateID: 7, MessageID: 70, ChatID: 1, FromID: 1, Text: "once"}
	h.fake.Send(m)
	h.fake.Send(m) // Telegram sends the same update again
	h.fake.Send(telegramtest.Message{UpdateID: 8, MessageID: 71, ChatID: 1, FromID: 1, Text: "sentinel"})
	if got := h.inboundUntil(t, "sentinel"); len(got) != 2 {
		t.Errorf("worker got %q, want the repeated update once", got)
	}
	if got := h.texts(t, 2); got["echo: once"] != 1 || got["echo: sentinel"] != 1 {
		t.Errorf("replies = %v", got)
	}
}

func TestLongAnswerArrivesInThreeMessages(t *testing.T) {
	para := strings.Repeat("lorem ipsum ", 8) + "dolor."
	var paras []string
	for len(strings.Join(paras, "\n\n")) < 9000 {
		paras = append(paras, para)
	}
	answer := strings.Join(paras, "\n\n")[:9000]
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{workertest.Final(answer)}
	})
	h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 9, ChatID: 3, FromID: 3, Text: "essay please"})
	var got []string
	for i := range 3 {
		c := h.nextSend(t)
		got = append(got, c.Fields["text"])
		if hasReply := c.Fields["reply_parameters"] != ""; hasReply != (i == 0) {
			t.Errorf("message %d reply_parameters = %q", i, c.Fields["reply_parameters"])
		}
		if n := len([]rune(c.Fields["text"])); n > 4096 {
			t.Errorf("message %d has %d chars", i, n)
		}
	}
	if strings.Join(strings.Fields(strings.Join(got, " ")), " ") != strings.Join(strings.Fields(answer), " ") {
		t.Error("the three messages do not add up to the answer")
	}
}

func TestPlainTextWhenEntitiesAreRejected(t *testing.T) {
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{workertest.Final("**bold** move")}
	})
	h.fake.Fail("sendMessage", telegramtest.CantParseEntities())
	h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 1, ChatID: 5, FromID: 5, Text: "x"})
	if c := h.nextSend(t); c.Fields["parse_mode"] != "HTML" {
		t.Fatalf("first attempt parse_mode = %q", c.Fields["parse_mode"])
	}
	c := h.expectText(t, "bold move")
	if c.Fields["parse_mode"] != "" {
		t.Errorf("fallback parse_mode = %q, want none", c.Fields["parse_mode"])
	}
}

var codeRE = regexp.MustCompile(`\b[A-HJ-NP-Z2-9]{8}\b`)

func TestStrangers(t *testing.T) {
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"owner"}, GroupPolicy: telegram.GroupOpen}}, workertest.Echo)
	// In a group: nothing, not even a pairing code.
	h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 1, ChatID: -100, ChatType: "supergroup", FromID: 66, Text: "hi bot"})
	// In a DM: a pairing code.
	h.fake.Send(telegramtest.Message{UpdateID: 2, MessageID: 2, ChatID: 66, FromID: 66, Text: "hello?"})
	c := h.nextSend(t)
	code := codeRE.FindString(c.Fields["text"])
	if c.Fields["chat_id"] != "66" || code == "" {
		t.Fatalf("expected a pairing code in the DM, got %v", c.Fields)
	}
	select {
	case in := <-h.worker.Inbound:
		t.Fatalf("a stranger's message was published: %v", in)
	default:
	}
	if err := access.Approve(context.Background(), h.bus, code); err != nil {
		t.Fatal(err)
	}
	if c := h.nextSend(t); !strings.Contains(c.Fields["text"], "approved") {
		t.Errorf("approval message = %q", c.Fields["text"])
	}
	h.fake.Send(telegramtest.Message{UpdateID: 3, MessageID: 3, ChatID: 66, FromID: 66, Text: "now?"})
	h.expectText(t, "echo: now?")
	if in := <-h.worker.Inbound; in.GetId() != "3" {
		t.Errorf("first published message is update %s, want 3", in.GetId())
	}
}

func TestOwnerApprovesByCommand(t *testing.T) {
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"@boss"}}}, workertest.Echo)
	h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 1, ChatID: 66, FromID: 66, Text: "let me in"})
	code := codeRE.FindString(h.nextSend(t).Fields["text"])
	h.fake.Send(telegramtest.Message{UpdateID: 2, MessageID: 2, ChatID: 10, FromID: 10, Username: "boss", Text: "/pairing approve " + code})
	seen := map[string]string{}
	for range 2 { // the owner's confirmation and the stranger's welcome
		c := h.nextSend(t)
		seen[c.Fields["chat_id"]] = c.Fields["text"]
	}
	if !strings.Contains(seen["10"], "Approved") || !strings.Contains(seen["66"], "approved") {
		t.Errorf("messages after /pairing approve: %v", seen)
	}
}

func TestGroupPolicy(t *testing.T) {
	tests := []struct {
		policy, text, want string // want "" means no reply
	}{
		{"", "hello everyone", ""},
		{telegram.GroupMention, "hey @Nano_Bot what's up", "echo: hey what's up"},
		{telegram.GroupOpen, "hello everyone", "echo: hello everyone"},
	}
	for _, tt := range tests {
		t.Run(tt.policy+"/"+tt.text, func(t *testing.T) {
			h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, GroupPolicy: tt.policy}}, workertest.Echo)
			h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 1, ChatID: -5, ChatType: "group", FromID: 9, Text: tt.text})
			h.fake.Send(telegramtest.Message{UpdateID: 2, MessageID: 2, ChatID: 9, FromID: 9, Text: "sentinel"})
			published, replies := 1, 1
			if tt.want != "" {
				published, replies = 2, 2
			}
			if got := h.inboundUntil(t, "sentinel"); len(got) != published {
				t.Errorf("worker got %q", got)
			}
			got := h.texts(t, replies)
			if got["echo: sentinel"] != 1 || (tt.want != "" && got[tt.want] != 1) {
				t.Errorf("replies = %v, want %q", got, tt.want)
			}
		})
	}
}

func TestMalformedUpdatesAreDropped(t *testing.T) {
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.Push(1, `{"update_id": 1, "message": "not an object"}`)
	h.fake.Push(2, `{"update_id": 2, "message": {"message_id": 1, "chat": {"id": 0}}}`)
	h.fake.Push(3, `{"no_update_id": true}`)
	h.fake.Push(4, `[1, 2, 3]`)
	h.fake.Send(telegramtest.Message{UpdateID: 5, MessageID: 5, ChatID: 2, FromID: 2, Text: "still alive?"})
	h.expectText(t, "echo: still alive?")
}

func TestProgressAndToolHints(t *testing.T) {
	yes := true
	release := make(chan struct{})
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, SendToolHints: &yes, SendProgress: &yes}}, func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{
			workertest.Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT, "$ ls -la"),
			workertest.Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, "do"),
			workertest.Final("done"),
		}
	}, workertest.BeforeDurable(func(*nanofleetv1.OutboundMessage) {
		select {
		case <-release:
		case <-time.After(wait):
		}
	}))
	h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 1, ChatID: 4, FromID: 4, Text: "list"})
	h.expectText(t, "<code>$ ls -la</code>")
	close(release) // the answer comes after the hint, as when a tool runs
	h.expectText(t, "done")
}

func TestMediaIsStored(t *testing.T) {
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	img := bytes.Repeat([]byte{0xff, 0xd8, 0xff}, 100)
	h.fake.AddFile("PHOTO1", "photos/file_1.jpg", img)
	h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 1, ChatID: 8, FromID: 8, Extra: map[string]any{
		"caption": "look",
		"photo":   []map[string]any{{"file_id": "PHOTO1", "file_unique_id": "U1", "width": 90, "height": 90, "file_size": len(img)}},
	}})
	in := <-h.worker.Inbound
	if in.GetContent() != "look" || len(in.GetMedia()) != 1 {
		t.Fatalf("inbound = %v", in)
	}
	ref := in.GetMedia()[0]
	blobs, err := h.bus.Blobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	data, err := blobs.GetBytes(context.Background(), ref.GetObject())
	if err != nil || !bytes.Equal(data, img) || ref.GetMimeType() != "image/jpeg" {
		t.Errorf("stored %d bytes (%v), mime %q", len(data), err, ref.GetMimeType())
	}
}

func TestOnePollerPerBotToken(t *testing.T) {
	fake := telegramtest.New(t, token)
	b := bustest.StartJetStream(t, channels.Assets)
	workertest.Start(t, b, workertest.Echo)
	first := &gatewaytest.Logs{}
	second := &gatewaytest.Logs{}
	_, stopFirst := runAdapterCancel(t, b, fake, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, slog.New(slog.NewTextHandler(first, &slog.HandlerOptions{Level: slog.LevelDebug})))
	first.WaitFor(t, "this gateway holds the account's connection lease", wait)
	runAdapter(t, b, fake, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, slog.New(slog.NewTextHandler(second, &slog.HandlerOptions{Level: slog.LevelDebug})))
	second.WaitFor(t, "another gateway holds this account's connection", wait)

	fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 1, ChatID: 2, FromID: 2, Text: "one"})
	fake.Next(t, wait, "sendMessage")
	stopFirst()
	second.WaitFor(t, "this gateway holds the account's connection lease", wait)
	fake.Send(telegramtest.Message{UpdateID: 2, MessageID: 2, ChatID: 2, FromID: 2, Text: "two"})
	// Stopping the first gateway may cut its delivery of "echo: one" after
	// Telegram got it but before the ack: delivery is at least once, and the
	// second gateway may send it again.
	for c := fake.Next(t, wait, "sendMessage"); c.Fields["text"] != "echo: two"; c = fake.Next(t, wait, "sendMessage") {
		if c.Fields["text"] != "echo: one" {
			t.Fatalf("after takeover got %q", c.Fields["text"])
		}
	}
	if n := fake.Conflicts(); n != 0 {
		t.Errorf("%d concurrent getUpdates calls; want one poller at a time", n)
	}
}

func TestWebhook(t *testing.T) {
	fake := telegramtest.New(t, token)
	b := bustest.StartJetStream(t, channels.Assets)
	w := workertest.Start(t, b, workertest.Echo)
	const secret = "s3cret-s3cret-s3cret"
	a := runAdapter(t, b, fake, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}, Webhook: telegram.Webhook{URL: "https://bot.example.com/tg/hook", Secret: secret}}, slog.New(slog.DiscardHandler))
	path, ok := a.Webhook()
	if !ok || path != "/tg/hook" {
		t.Fatalf("Webhook() = %q, %v", path, ok)
	}
	fake.Next(t, wait, "setWebhook")
	if url, s := fake.Webhook(); url != "https://bot.example.com/tg/hook" || s != secret {
		t.Errorf("setWebhook url=%q secret=%q", url, s)
	}
	srv := httptest.NewServer(a.WebhookHandler())
	defer srv.Close()
	post := func(secret, body string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	msg := telegramtest.Message{UpdateID: 11, MessageID: 1, ChatID: 3, FromID: 3, Text: "via hook"}.JSON()
	if code := post("wrong", msg); code != http.StatusUnauthorized {
		t.Errorf("wrong secret: %d", code)
	}
	if code := post(secret, `{"update_id": 10, "message": 5}`); code != http.StatusOK {
		t.Errorf("malformed update: %d, want 200 (dropped)", code)
	}
	deadline := time.Now().Add(wait)
	for code := post(secret, msg); code != http.StatusOK; code = post(secret, msg) {
		if time.Now().After(deadline) { // 503 until Run has identified the bot
			t.Fatalf("webhook update: %d", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c := fake.Next(t, wait, "sendMessage"); c.Fields["text"] != "echo: via hook" {
		t.Errorf("reply %q", c.Fields["text"])
	}
	if in := <-w.Inbound; in.GetId() != "11" {
		t.Errorf("inbound id %q", in.GetId())
	}
}
