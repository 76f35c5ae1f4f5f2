package telegram_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"strconv"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram/telegramtest"
)

const token = "123456:TEST-token"

const wait = 10 * time.Second

type harness struct {
	adaptertest.Env
	fake    *telegramtest.Server
	adapter *telegram.Adapter
}

// start runs a gateway with a Telegram adapter against a fake Bot API, and
// a fake worker answering with script.
func start(t *testing.T, cfg telegram.Config, script workertest.Script, opts ...workertest.Option) *harness {
	t.Helper()
	h := &harness{Env: adaptertest.NewEnv(t, script, opts...), fake: telegramtest.New(t, token)}
	h.adapter = runAdapter(t, h.Bus, h.fake, cfg, slog.New(slog.DiscardHandler))
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
	g, a := adaptertest.StartGateway(t, b, log, func(ctx context.Context, deps adapterdeps.Deps, log *slog.Logger) (*telegram.Adapter, error) {
		return telegram.New(ctx, cfg, deps, telegram.WithLogger(log),
			telegram.WithPollTimeout(time.Second), telegram.WithTyping(time.Second, 5*time.Second))
	})
	return a, g.Stop
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
	}, workertest.HoldUntil(release, wait))
	h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 5, ChatID: 42, FromID: 42, Username: "alice", Text: "hello"})

	in := h.Worker.Next(t)
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

// TestCommandMenu: the bot's command menu lists the fleet's slash
// commands, as nanobot registers its own, in the form Telegram takes
// ('_' for '-'; the fake refuses a name Telegram would).
func TestCommandMenu(t *testing.T) {
	h := start(t, telegram.Config{}, workertest.Echo)
	c := h.fake.Next(t, wait, "setMyCommands")
	var cmds []struct{ Command, Description string }
	if err := json.Unmarshal([]byte(c.Fields["commands"]), &cmds); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range cmds {
		names = append(names, m.Command)
		if m.Description == "" {
			t.Errorf("command %s has no description", m.Command)
		}
	}
	if got, want := strings.Join(names, " "), "new stop status model history skill dream_log dream_restore help"; got != want {
		t.Errorf("menu %q, want %q", got, want)
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

// TestRepliesWithinLimit: every piece of a reply is within Telegram's
// 4,096 UTF-16 units once its HTML is parsed (the fake refuses more, as
// Telegram does), however much rendering adds; escapes count once.
func TestRepliesWithinLimit(t *testing.T) {
	table := adaptertest.PaddedTable(60, 60)
	tests := []struct {
		name   string
		answer string
		pieces int // 0: more than one
	}{
		{"escapes count once", strings.Repeat("a < b & c ", 390), 1},
		{"emoji outside the BMP", strings.Repeat("😀", 2100), 2},
		{"padded table", table, 0},
		{"thematic breaks", strings.Repeat("---\n\n", 700), 0},
	}
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		i, _ := strconv.Atoi(in.GetContent())
		return []*nanofleetv1.OutboundMessage{workertest.Final(tests[i].answer + "\n\nEND")}
	})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.fake.Send(telegramtest.Message{UpdateID: int64(i + 1), MessageID: i + 1, ChatID: 7, FromID: 7, Text: strconv.Itoa(i)})
			var texts []string
			for len(texts) == 0 || !strings.HasSuffix(texts[len(texts)-1], "END") {
				c := h.nextSend(t)
				if n := telegramtest.TextLen(c.Fields["text"], c.Fields["parse_mode"]); c.MessageID == 0 || c.Fields["parse_mode"] != "HTML" {
					t.Fatalf("piece %d of %d units (parse_mode %q) refused, or sent as plain text after a refusal", len(texts), n, c.Fields["parse_mode"])
				}
				texts = append(texts, c.Fields["text"])
			}
			adaptertest.WantPieces(t, len(texts), tt.pieces)
			if n := strings.Count(strings.Join(texts, ""), "wide"); n != strings.Count(tt.answer, "wide") {
				t.Errorf("%d of the table's %d words sent", n, strings.Count(tt.answer, "wide"))
			}
		})
	}
}

// TestStreamedTableWithinLimit: an answer streamed by editing one message
// stays within Telegram's limit once rendered at every post and edit, and
// the rest of it follows in messages of its own.
func TestStreamedTableWithinLimit(t *testing.T) {
	table := adaptertest.PaddedTable(60, 60)
	answer := table + "\n\nEND"
	release := make(chan struct{})
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, Streaming: true, StreamEditInterval: 0.1}},
		workertest.Streamed(answer, workertest.Deltas(answer)...), workertest.HoldUntil(release, wait))
	h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 1, ChatID: 8, FromID: 8, Text: "table please"})
	adaptertest.StreamedPieces(t, release, func() adaptertest.StreamCall {
		c := h.fake.Next(t, wait, "sendMessage", "editMessageText")
		s := adaptertest.StreamCall{Edit: c.Method == "editMessageText", Text: c.Fields["text"]}
		if c.MessageID == 0 {
			s.Refused = fmt.Sprintf("%s of %d units", c.Method, telegramtest.TextLen(c.Fields["text"], c.Fields["parse_mode"]))
		}
		return s
	})
}

var codeRE = regexp.MustCompile(`\b[A-HJ-NP-Z2-9]{8}\b`)

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

func TestProgressAndToolHints(t *testing.T) {
	yes := true
	release := make(chan struct{})
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, SendToolHints: &yes, SendProgress: &yes}}, func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{
			workertest.Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT, "$ ls -la"),
			workertest.Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, "do"),
			workertest.Final("done"),
		}
	}, workertest.HoldUntil(release, wait))
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
	in := h.Worker.Next(t)
	if in.GetContent() != "look" {
		t.Errorf("inbound = %v", in)
	}
	ref, data := adaptertest.Stored(t, h.Bus, in)
	if !bytes.Equal(data, img) || ref.GetMimeType() != "image/jpeg" {
		t.Errorf("stored %d bytes, mime %q", len(data), ref.GetMimeType())
	}
}

// TestAttachmentFailures: a reply's attachments are counted as pieces
// after its text, so the retry after a 5xx on the second attachment sends
// that attachment only (the text and each attachment reach the chat
// once); an upload Telegram refuses (400) is not retried, the chat is
// told in plain text and the reply goes on.
func TestAttachmentFailures(t *testing.T) {
	refs := []*nanofleetv1.MediaRef{
		{Object: "t/a.pdf", Name: "a.pdf", MimeType: "application/pdf"},
		{Object: "t/b.pdf", Name: "b.pdf", MimeType: "application/pdf"},
	}
	data := [][]byte{[]byte("%PDF-1.4 a"), []byte("%PDF-1.4 b")}
	type call struct {
		method, text string
		doc          []byte
	}
	tests := []struct {
		name   string
		passed int // documents sent before the failure
		fail   telegramtest.Failure
		want   []call // every call that sends, in order
	}{
		{"second attachment failing once", 1, telegramtest.Failure{Code: 500, Description: "Internal Server Error"},
			[]call{{"sendMessage", "here", nil}, {"sendDocument", "", data[0]}, {"sendDocument", "", data[1]}, {"sendDocument", "", data[1]}}},
		{"first attachment refused", 0, telegramtest.Failure{Code: 400, Description: "Bad Request: file is too big"},
			[]call{{"sendMessage", "here", nil}, {"sendDocument", "", data[0]}, {"sendMessage", "[attachment a.pdf was refused by Telegram; not sent]", nil}, {"sendDocument", "", data[1]}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.WithMedia("here", refs...))
			workertest.StoreMedia(t, h.Bus, refs, data)
			if tt.passed > 0 {
				h.fake.Pass("sendDocument", tt.passed)
			}
			h.fake.Fail("sendDocument", tt.fail)
			h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 1, ChatID: 8, FromID: 8, Text: "two files please"})
			for i, w := range tt.want {
				c := h.fake.Next(t, wait, "sendMessage", "sendDocument", "sendPhoto")
				if c.Method != w.method || c.Fields["text"] != w.text || !bytes.Equal(c.Files["document"], w.doc) {
					t.Fatalf("call %d: %s %q with document %q; want %s %q with %q", i, c.Method, c.Fields["text"], c.Files["document"], w.method, w.text, w.doc)
				}
			}
			gatewaytest.WaitDelivered(t, h.Bus, telegram.Channel, 1, wait)
			h.fake.None(t, "sendMessage", "sendDocument", "sendPhoto")
		})
	}
}

// TestGoneAttachmentIsANote: an attachment the store no longer holds can
// never be sent, so it is not retried: the chat gets the text, a note
// naming the attachment (plain text) and the next attachment, each once.
func TestGoneAttachmentIsANote(t *testing.T) {
	refs := []*nanofleetv1.MediaRef{
		{Object: "t/gone.pdf", Name: "gone.pdf", MimeType: "application/pdf"},
		{Object: "t/b.pdf", Name: "b.pdf", MimeType: "application/pdf"},
	}
	doc := []byte("%PDF-1.4 b")
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.WithMedia("here", refs...))
	workertest.StoreMedia(t, h.Bus, refs, [][]byte{nil, doc})
	h.fake.Send(telegramtest.Message{UpdateID: 1, MessageID: 1, ChatID: 8, FromID: 8, Text: "two files please"})
	want := []struct {
		method, text, parseMode string
		doc                     []byte
	}{
		{"sendMessage", "here", "HTML", nil},
		{"sendMessage", "[attachment gone.pdf is no longer stored; not sent]", "", nil},
		{"sendDocument", "", "", doc},
	}
	for i, w := range want {
		c := h.fake.Next(t, wait, "sendMessage", "sendDocument", "sendPhoto")
		if c.Method != w.method || c.Fields["text"] != w.text || c.Fields["parse_mode"] != w.parseMode || !bytes.Equal(c.Files["document"], w.doc) {
			t.Fatalf("call %d: %s %q (%q) with document %q; want %s %q (%q) with %q", i, c.Method, c.Fields["text"], c.Fields["parse_mode"], c.Files["document"], w.method, w.text, w.parseMode, w.doc)
		}
	}
	gatewaytest.WaitDelivered(t, h.Bus, telegram.Channel, 1, wait)
	h.fake.None(t, "sendMessage", "sendDocument", "sendPhoto")
}

func TestOnePollerPerBotToken(t *testing.T) {
	fake := telegramtest.New(t, token)
	b := adaptertest.NewEnv(t, workertest.Echo).Bus
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
	env := adaptertest.NewEnv(t, workertest.Echo)
	b, w := env.Bus, env.Worker
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
	bustest.Eventually(t, wait, func() error { // 503 until Run has identified the bot
		if code := post(secret, msg); code != http.StatusOK {
			return fmt.Errorf("webhook update: %d", code)
		}
		return nil
	})
	if c := fake.Next(t, wait, "sendMessage"); c.Fields["text"] != "echo: via hook" {
		t.Errorf("reply %q", c.Fields["text"])
	}
	if in := w.Next(t); in.GetId() != "11" {
		t.Errorf("inbound id %q", in.GetId())
	}
}

// TestMentionStripped: "@botname" is found in the lower-cased text and cut
// out of the text itself. strings.ToLower changes the length of some
// characters (İ grows by a byte, the Kelvin sign K shrinks by two), so the
// offsets no longer matched and the cut split characters: the inbound
// message was invalid UTF-8, which proto.Marshal refuses, and was lost.
func TestMentionStripped(t *testing.T) {
	h := start(t, telegram.Config{Common: channelconfig.Common{AllowFrom: []string{"42"}}}, workertest.Echo)
	tests := []struct{ name, text, want string }{
		{"ascii", "@Nano_Bot hello", "hello"},
		{"emoji around", "😀@nano_bot😀 hi", "😀😀 hi"},
		{"text that grows when lowered", "İİ @nano_bot 你好", "İİ 你好"},
		{"text that shrinks when lowered", "\u212A @NANO_BOT 好", "\u212A 好"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.fake.Send(telegramtest.Message{UpdateID: int64(i + 1), MessageID: i + 1, ChatID: -100, ChatType: "supergroup", FromID: 42, Text: tt.text})
			if in := h.Worker.Next(t); in.GetContent() != tt.want {
				t.Errorf("inbound content %q, want %q", in.GetContent(), tt.want)
			}
		})
	}
}

// TestAdapter runs the scenarios every adapter passes.
func TestAdapter(t *testing.T) {
	adaptertest.Run(t, adaptertest.Platform{Limit: markup.TelegramLimit, Quotes: adaptertest.QuotesFirst, Group: "-100", Start: startSuite})
}

// users are the scenarios' users as Telegram user ids.
var users = map[string]int64{adaptertest.Owner: 10, adaptertest.Stranger: 66, adaptertest.Alice: 42}

type suiteFake struct {
	*telegramtest.Server
	*adaptertest.Restarter
}

func (f suiteFake) DM(t *testing.T, n int, user, text string) (id, chat string) {
	u := users[user]
	f.Send(telegramtest.Message{UpdateID: int64(n), MessageID: n, ChatID: u, FromID: u, Text: text})
	return strconv.Itoa(n), strconv.FormatInt(u, 10)
}

func (f suiteFake) Group(t *testing.T, n int, user, text string, mention bool) {
	if mention {
		text = "@" + f.BotUsername + " " + text
	}
	f.Send(telegramtest.Message{UpdateID: int64(n), MessageID: n, ChatID: -100, ChatType: "supergroup", FromID: users[user], Text: text})
}

func (f suiteFake) Next(t *testing.T) adaptertest.Sent {
	t.Helper()
	c := f.Server.Next(t, adaptertest.Wait, "sendMessage")
	return adaptertest.Sent{
		Chat: c.Fields["chat_id"], Text: c.Fields["text"], At: c.At,
		Refused: c.MessageID == 0, Quotes: c.Fields["reply_parameters"] != "",
	}
}

func (f suiteFake) RateLimit(t *testing.T, after int) time.Duration {
	f.Pass("sendMessage", after)
	f.Fail("sendMessage", telegramtest.TooManyRequests(1))
	return time.Second
}

func (f suiteFake) Malformed(t *testing.T) ([]string, int) {
	f.Push(1, `{"update_id": 1, "message": "not an object"}`)
	f.Push(2, `{"update_id": 2, "message": {"message_id": 1, "chat": {"id": 0}}}`)
	f.Push(3, `{"no_update_id": true}`)
	f.Push(4, `[1, 2, 3]`)
	return []string{"dropping malformed Telegram update"}, 4
}

// startSuite runs the adapter for a scenario.
func startSuite(t *testing.T, b *bus.Bus, common channelconfig.Common, log *slog.Logger) adaptertest.Fake {
	f := suiteFake{Server: telegramtest.New(t, token)}
	f.Restarter = adaptertest.NewRestarter(func() func() {
		_, stop := runAdapterCancel(t, b, f.Server, telegram.Config{Common: common}, log)
		return stop
	})
	return f
}
