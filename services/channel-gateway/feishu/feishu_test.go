package feishu_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu/feishutest"
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
	fake    *feishutest.Server
	logs    *gatewaytest.Logs
	adapter *feishu.Adapter
}

func start(t *testing.T, cfg feishu.Config, script workertest.Script, opts ...workertest.Option) *harness {
	t.Helper()
	h := &harness{Env: adaptertest.NewEnv(t, script, opts...), fake: feishutest.New(t)}
	h.adapter, _ = h.gateway(t, cfg)
	if cfg.Mode != feishu.ModeWebhook {
		h.fake.WaitConnected(t, wait)
	}
	return h
}

// startPaced is start with the adapter's streams paced by clock, which
// also stamps the fake's calls.
func startPaced(t *testing.T, cfg feishu.Config, clock *adaptertest.Clock, script workertest.Script, opts ...workertest.Option) *harness {
	t.Helper()
	h := &harness{Env: adaptertest.NewEnv(t, script, opts...), fake: feishutest.New(t), logs: &gatewaytest.Logs{}}
	h.fake.SetClock(clock.Now)
	h.adapter, _ = runAdapter(t, h.Bus, h.fake, cfg, slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelWarn})), feishu.WithStreamClock(clock))
	h.fake.WaitConnected(t, wait)
	return h
}

// gateway runs one more gateway with a Feishu adapter for cfg on the
// harness's bus and fake; it stops when stop is called or the test ends.
func (h *harness) gateway(t *testing.T, cfg feishu.Config) (a *feishu.Adapter, stop func()) {
	t.Helper()
	if h.logs == nil {
		h.logs = &gatewaytest.Logs{}
	}
	return runAdapter(t, h.Bus, h.fake, cfg, slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// runAdapter runs a gateway on b with a Feishu adapter for cfg against
// fake; stop stops it.
func runAdapter(t *testing.T, b *bus.Bus, fake *feishutest.Server, cfg feishu.Config, log *slog.Logger, opts ...feishu.Option) (a *feishu.Adapter, stop func()) {
	t.Helper()
	cfg.Enabled, cfg.AppID, cfg.AppSecret, cfg.BaseURL = true, feishutest.AppID, feishutest.AppSecret, fake.URL
	g, a := adaptertest.StartGateway(t, b, log, func(ctx context.Context, deps adapterdeps.Deps, log *slog.Logger) (*feishu.Adapter, error) {
		return feishu.New(ctx, cfg, deps, append([]feishu.Option{feishu.WithLogger(log)}, opts...)...)
	})
	return a, g.Stop
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
	in := h.Worker.Next(t)
	if in.GetId() != "ev-1" || in.GetChatId() != "oc_p2p" || in.GetSenderId() != "ou_ada" || in.GetMetadata()["message_id"] != "om_in1" {
		t.Errorf("inbound = %v", in)
	}
}

// TestPingIntervalPastADuration: a PingInterval too long for a
// time.Duration wrapped around to a negative one, which the ping timer
// takes as now, so the adapter pinged without pause. Held at the bound,
// it pings once, on connecting.
func TestPingIntervalPastADuration(t *testing.T) {
	h := &harness{Env: adaptertest.NewEnv(t, workertest.Echo), fake: feishutest.New(t)}
	h.fake.PingInterval = int(config.MaxSeconds + 1)
	h.adapter, _ = h.gateway(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}})
	h.fake.WaitConnected(t, wait)
	bustest.Eventually(t, wait, func() error {
		if h.fake.Pings() == 0 {
			return errors.New("no ping yet")
		}
		return nil
	})
	// An event's round trip through the bus: time for many pings.
	h.answered(t, 1, "hello")
	if n := h.fake.Pings(); n != 1 {
		t.Errorf("%d pings, want 1 (the one on connecting)", n)
	}
}

func TestMentionsOfOthersAreNamed(t *testing.T) {
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_g", "group", "om_1", "@_user_1 ask @_user_2",
		feishutest.BotMention, feishutest.Mention{Key: "@_user_2", OpenID: "ou_bob", Name: "Bob"}))
	if got := h.Worker.ContentsUntil(t, "ask @Bob", wait); len(got) != 1 {
		t.Errorf("worker got %q", got)
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
	if got := h.Worker.ContentsUntil(t, "in three parts", wait); len(got) != 2 {
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
	want := []struct{ data, mime string }{{"\x89PNG\r\n\x1a\nfake", "image/png"}, {"%PDF-1.4 fake", "application/pdf"}}
	for i, w := range want {
		ref, data := adaptertest.Stored(t, h.Bus, h.Worker.Next(t))
		if string(data) != w.data || ref.GetMimeType() != w.mime {
			t.Errorf("message %d: stored %q (%s)", i, data, ref.GetMimeType())
		}
	}
	if got := h.Worker.ContentsUntil(t, "Plan\nsee [docs](https://x.test)", wait); len(got) != 1 {
		t.Errorf("post became %q", got)
	}
	// A resource the platform no longer has: the message still arrives,
	// saying so.
	h.fake.Send(t, feishutest.Message("ev-4", "ou_ada", "oc_p2p", "p2p", "om_gone", "file", map[string]string{"file_key": "file_gone", "file_name": "gone.txt"}))
	if got := h.Worker.ContentsUntil(t, "[attachment gone.txt not downloaded]", wait); len(got) != 1 {
		t.Errorf("worker got %q", got)
	}
}

// TestLargeResourceIsNotRead: Feishu's SDK reads a download whole before
// the media store's limit applies, and the sender chose the file's size.
// A file far over the limit must be refused without reading it.
func TestLargeResourceIsNotRead(t *testing.T) {
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, MaxMediaBytes: 1000}}, workertest.Echo)
	const size = 64 << 20
	h.fake.AddResource("om_big", "file_big", make([]byte, size))
	h.fake.Send(t, feishutest.Message("ev-1", "ou_ada", "oc_p2p", "p2p", "om_big", "file", map[string]string{"file_key": "file_big", "file_name": "big.bin"}))
	if got := h.Worker.ContentsUntil(t, "[attachment big.bin not downloaded]", wait); len(got) != 1 {
		t.Errorf("worker got %q", got)
	}
	if n := h.fake.Served("om_big", "file_big"); n > 16<<20 {
		t.Errorf("the gateway took %d bytes of a %d-byte file over its 1,000-byte limit", n, size)
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
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, SendToolHints: &yes}}, workertest.AfterHint("read src/main.go", "done"), workertest.HoldUntil(release, wait))
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

// TestWithinRequestLimits: progress and every piece of a reply fit the
// platform's request limits (150 KB for text, 30 KB for a card; the fake
// refuses more with 230025, as the platform does), however much JSON
// escaping adds: json.Marshal writes < as \u003c, six bytes, seven in the
// request.
func TestWithinRequestLimits(t *testing.T) {
	progress, final := nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS, nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL
	tests := []adaptertest.LimitCase{
		{Name: "short progress", Kind: progress, Content: "looking it up", Pieces: 1},
		{Name: "long progress", Kind: progress, Content: strings.Repeat("a", 200000), Pieces: 1},
		{Name: "progress of less-than signs", Kind: progress, Content: strings.Repeat("<", 25000), Pieces: 1},
		{Name: "reply in Chinese", Kind: final, Content: strings.Repeat("中", 9000), Pieces: 2},
		{Name: "reply of less-than signs", Kind: final, Content: strings.Repeat("<", 8000), Pieces: 0},
	}
	yes := true
	h := start(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, SendProgress: &yes}}, adaptertest.LimitScript(tests, func(content string) int {
		i, _ := strconv.Atoi(content)
		return i
	}))
	for i, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			h.fake.Send(t, feishutest.Text(fmt.Sprintf("ev-%d", i), "ou_ada", "oc_p2p", "p2p", fmt.Sprintf("om_%d", i), strconv.Itoa(i)))
			var sent []string
			for len(sent) == 0 || (tt.Kind == final && !strings.HasSuffix(feishutest.CardText(sent[len(sent)-1]), "END")) {
				c := h.fake.Next(t, wait, "reply")
				if c.TooLong {
					t.Fatalf("piece %d of %d bytes (%s) refused", len(sent), c.Size, c.Str("msg_type"))
				}
				sent = append(sent, c.Str("content"))
			}
			adaptertest.WantPieces(t, len(sent), tt.Pieces)
		})
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
	if got := h.Worker.ContentsUntil(t, "sentinel", wait); len(got) != 2 || got[0] != "by hook" {
		t.Errorf("worker got %q, want only the signed events", got)
	}
	if got := adaptertest.Texts(t, &suiteFake{Server: h.fake}, 2); got["echo: by hook"] != 1 {
		t.Errorf("replies = %v", got)
	}
}

// TestOneConnectionPerApp: a second gateway waits while the first holds
// the app's connection, and takes over when the first stops; the status
// names the app.
func TestOneConnectionPerApp(t *testing.T) {
	h := &harness{Env: adaptertest.NewEnv(t, workertest.Echo), fake: feishutest.New(t)}
	run := func() func() {
		_, stop := h.gateway(t, feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}})
		return stop
	}
	adaptertest.OneConnection(t, h.Bus, h.fake, feishu.Channel, "nano", run, h.answered)
}

// answered sends event n, a direct message with text, and checks that the
// worker got it and the echo came back once.
func (h *harness) answered(t *testing.T, n int, text string) {
	t.Helper()
	h.fake.Send(t, feishutest.Text(fmt.Sprintf("ev-%d", n), "ou_ada", "oc_p2p", "p2p", fmt.Sprintf("om_%d", n), text))
	h.Worker.ContentsUntil(t, text, wait)
	if got := adaptertest.Texts(t, &suiteFake{Server: h.fake}, 1); got["echo: "+text] != 1 {
		t.Errorf("replies = %v", got)
	}
}

func TestValidate(t *testing.T) {
	ok := feishu.Config{Common: channelconfig.Common{Enabled: true}, AppID: "cli_1", AppSecret: "s"}
	own := []adaptertest.ConfigCase[feishu.Config]{
		{Name: "app id", Change: func(c *feishu.Config) { c.AppID = "" }, Key: "channels.feishu.appId"},
		{Name: "app secret", Change: func(c *feishu.Config) { c.AppSecret = " " }, Key: "channels.feishu.appSecret"},
		{Name: "domain", Change: func(c *feishu.Config) { c.Domain = "larksuite" }, Key: "channels.feishu.domain"},
		{Name: "mode", Change: func(c *feishu.Config) { c.Mode = "poll" }, Key: "channels.feishu.mode"},
		{Name: "webhook without encrypt key", Change: func(c *feishu.Config) { c.Mode, c.VerificationToken = feishu.ModeWebhook, "v" }, Key: "channels.feishu.encryptKey"},
		{Name: "webhook without token", Change: func(c *feishu.Config) { c.Mode, c.EncryptKey = feishu.ModeWebhook, "k" }, Key: "channels.feishu.verificationToken"},
		{Name: "webhook path", Change: func(c *feishu.Config) { c.Webhook.Path = "hooks" }, Key: "channels.feishu.webhook.path"},
		{Name: "dm policy", Change: func(c *feishu.Config) { c.DMPolicy = "maybe" }, Key: "channels.feishu.dmPolicy"},
		{Name: "reply format", Change: func(c *feishu.Config) { c.ReplyFormat = "html" }, Key: "channels.feishu.replyFormat"},
		{Name: "base url", Change: func(c *feishu.Config) { c.BaseURL = "open.feishu.cn" }, Key: "channels.feishu.baseUrl"},
		{Name: "stream edit interval", Change: func(c *feishu.Config) { c.StreamEditInterval = -1 }, Key: "channels.feishu.streamEditInterval"},
	}
	common := func(c *feishu.Config) *channelconfig.Common { return &c.Common }
	adaptertest.Validate(t, ok, append(adaptertest.CommonConfigCases("feishu", common), own...))
}

func toJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

func TestRejectedCredentialsStopTheAdapter(t *testing.T) {
	fake := feishutest.New(t)
	// An app id of its own: the SDK caches tenant tokens process-wide by
	// app id, and other tests got one for feishutest.AppID.
	cfg := feishu.Config{Common: channelconfig.Common{Enabled: true}, AppID: "cli_rejected", AppSecret: "wrong", BaseURL: fake.URL}
	adaptertest.Refused(t, "rejected", func(ctx context.Context, b *bus.Bus, gate *access.Gate, log *slog.Logger) (gateway.Adapter, error) {
		return feishu.New(ctx, cfg, feishu.Deps{Bus: b, Gate: gate}, feishu.WithLogger(log))
	})
}
