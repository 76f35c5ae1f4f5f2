package slack_test

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
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack/slacktest"
)

const wait = 10 * time.Second

type harness struct {
	fake   *slacktest.Server
	bus    *bus.Bus
	worker *workertest.Worker
}

func start(t *testing.T, cfg slack.Config, script workertest.Script, opts ...workertest.Option) *harness {
	t.Helper()
	h := &harness{fake: slacktest.New(t), bus: bustest.StartJetStream(t, channels.Assets)}
	h.worker = workertest.Start(t, h.bus, script, opts...)
	cfg.Enabled, cfg.BotToken, cfg.AppToken, cfg.APIURL = true, "xoxb-test", "xapp-test", h.fake.APIURL
	gatewaytest.Run(t, h.bus, slog.New(slog.DiscardHandler), func(ctx context.Context, gate *access.Gate, log *slog.Logger) (gateway.Adapter, error) {
		return slack.New(ctx, cfg, slack.Deps{Bus: h.bus, Gate: gate}, slack.WithLogger(log))
	})
	h.fake.WaitConnected(t, wait)
	return h
}

// inboundUntil returns the contents of the messages the worker took, up
// to the one with content last, in the order the adapter published them.
func (h *harness) inboundUntil(t *testing.T, last string) []string {
	t.Helper()
	return h.worker.ContentsUntil(t, last, wait)
}

// texts collects the texts of the next n posts; replies in different
// chats may be delivered in either order.
func (h *harness) texts(t *testing.T, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		got[h.fake.Next(t, wait, "chat.postMessage").Fields["text"]]++
	}
	return got
}

func (h *harness) expectPost(t *testing.T, text string) slacktest.Call {
	t.Helper()
	c := h.fake.Next(t, wait, "chat.postMessage")
	if c.Fields["text"] != text {
		t.Fatalf("chat.postMessage text = %q, want %q", c.Fields["text"], text)
	}
	return c
}

func TestDirectMessage(t *testing.T) {
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"U1"}}}, func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{workertest.Final("**Hi** " + in.GetContent() + " & <bye>")}
	})
	env := h.fake.Send(t, "Ev1", slacktest.Message("U1", "D1", "im", "100.1", "hello"))
	h.fake.WaitAck(t, env, wait)
	c := h.expectPost(t, "*Hi* hello &amp; &lt;bye&gt;")
	if c.Fields["channel"] != "D1" || c.Fields["thread_ts"] != "" || c.Token != "xoxb-test" {
		t.Errorf("chat.postMessage = %+v", c)
	}
	in := <-h.worker.Inbound
	if in.GetId() != "Ev1" || in.GetChatId() != "D1" || in.GetSenderId() != "U1" || in.GetSessionKey() != "" {
		t.Errorf("inbound = %v", in)
	}
}

func TestMentionInChannelRepliesInThread(t *testing.T) {
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	text := "<@" + slacktest.BotUserID + "> what time is it?"
	// Slack sends both events for a mention.
	h.fake.Send(t, "Ev2", slacktest.Message("U2", "C1", "channel", "200.5", text))
	h.fake.Send(t, "Ev3", slacktest.AppMention("U2", "C1", "200.5", text))
	c := h.expectPost(t, "echo: what time is it?")
	if c.Fields["channel"] != "C1" || c.Fields["thread_ts"] != "200.5" {
		t.Errorf("reply fields = %v, want thread 200.5 in C1", c.Fields)
	}
	in := <-h.worker.Inbound
	if in.GetSessionKey() != "slack:C1:200.5" {
		t.Errorf("session key = %q", in.GetSessionKey())
	}
	h.fake.Send(t, "Ev4", slacktest.Message("U2", "D2", "im", "201.0", "sentinel"))
	if got := h.inboundUntil(t, "sentinel"); len(got) != 1 {
		t.Errorf("worker got %q after the mention, want only the sentinel", got)
	}
}

func TestGroupPolicy(t *testing.T) {
	tests := []struct {
		name  string
		cfg   slack.Config
		reply bool
	}{
		{"mention needed", slack.Config{}, false},
		{"open", slack.Config{Common: channelconfig.Common{GroupPolicy: slack.GroupOpen}}, true},
		{"allowlisted channel", slack.Config{Common: channelconfig.Common{GroupPolicy: slack.GroupAllowlist, GroupAllowFrom: []string{"C9"}}}, true},
		{"other channel", slack.Config{Common: channelconfig.Common{GroupPolicy: slack.GroupAllowlist, GroupAllowFrom: []string{"C8"}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.AllowFrom = []string{"*"}
			h := start(t, tt.cfg, workertest.Echo)
			h.fake.Send(t, "Ev1", slacktest.Message("U1", "C9", "channel", "1.1", "chatter"))
			h.fake.Send(t, "Ev2", slacktest.Message("U1", "D1", "im", "1.2", "sentinel"))
			n := 1
			if tt.reply {
				n = 2
			}
			if got := h.inboundUntil(t, "sentinel"); len(got) != n {
				t.Errorf("worker got %q", got)
			}
			got := h.texts(t, n)
			if got["echo: sentinel"] != 1 || (tt.reply && got["echo: chatter"] != 1) {
				t.Errorf("replies = %v", got)
			}
		})
	}
}

func TestRateLimitIsHonoured(t *testing.T) {
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.Fail("chat.postMessage", slacktest.Failure{Status: 429, RetryAfter: 1})
	h.fake.Send(t, "Ev1", slacktest.Message("U1", "D1", "im", "1.1", "hi"))
	h.fake.Next(t, wait, "chat.postMessage")
	first := time.Now()
	h.expectPost(t, "echo: hi")
	if d := time.Since(first); d < 900*time.Millisecond {
		t.Errorf("retried after %s, before Retry-After: 1", d)
	}
}

func TestRepeatedEventYieldsOneReply(t *testing.T) {
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	ev := slacktest.Message("U1", "D1", "im", "1.1", "once")
	e1 := h.fake.Send(t, "EvSame", ev)
	e2 := h.fake.Send(t, "EvSame", ev) // Slack retries an event
	h.fake.WaitAck(t, e1, wait)
	h.fake.WaitAck(t, e2, wait)
	h.fake.Send(t, "EvNext", slacktest.Message("U1", "D1", "im", "1.2", "sentinel"))
	if got := h.inboundUntil(t, "sentinel"); len(got) != 2 {
		t.Errorf("worker got %q, want the repeated event once", got)
	}
	if got := h.texts(t, 2); got["echo: once"] != 1 || got["echo: sentinel"] != 1 {
		t.Errorf("replies = %v", got)
	}
}

func TestLongAnswerArrivesInThreeMessages(t *testing.T) {
	answer := strings.TrimSpace(strings.Repeat(strings.Repeat("word ", 40)+"\n\n", 45))[:9000]
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{workertest.Final(answer)}
	})
	h.fake.Send(t, "Ev1", slacktest.AppMention("U1", "C1", "5.5", "<@UBOT> long please"))
	var total int
	for range 3 {
		c := h.fake.Next(t, wait, "chat.postMessage")
		if c.Fields["thread_ts"] != "5.5" {
			t.Errorf("piece outside the thread: %v", c.Fields["thread_ts"])
		}
		total += len(strings.Join(strings.Fields(c.Fields["text"]), ""))
	}
	if want := len(strings.Join(strings.Fields(answer), "")); total != want {
		t.Errorf("pieces hold %d non-space chars, answer %d", total, want)
	}
}

var codeRE = regexp.MustCompile(`\b[A-HJ-NP-Z2-9]{8}\b`)

func TestStrangers(t *testing.T) {
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"UOWNER"}}}, workertest.Echo)
	h.fake.Send(t, "Ev1", slacktest.AppMention("UX", "C1", "1.1", "<@UBOT> hi"))
	h.fake.Send(t, "Ev2", slacktest.Message("UX", "DX", "im", "1.2", "hi"))
	c := h.fake.Next(t, wait, "chat.postMessage")
	if c.Fields["channel"] != "DX" || codeRE.FindString(c.Fields["text"]) == "" {
		t.Fatalf("want a pairing code in the DM, got %v", c.Fields)
	}
	h.fake.Send(t, "Ev3", slacktest.Message("UOWNER", "DO", "im", "1.3", "sentinel"))
	if got := h.inboundUntil(t, "sentinel"); len(got) != 1 {
		t.Errorf("worker got %q: a stranger's message was published", got)
	}
}

func TestMalformedEnvelopesAreDropped(t *testing.T) {
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	h.fake.Raw(t, `{"type":"events_api","envelope_id":"bad1","payload":{"event":"not an object"}}`)
	h.fake.Raw(t, `{"type":"events_api","envelope_id":"bad2","payload":{"event_id":"Ev9","event":{"type":"message"}}}`)
	h.fake.Raw(t, `{"type":"mystery","envelope_id":"bad3"}`)
	h.fake.Raw(t, `not json at all`)
	h.fake.WaitAck(t, "bad1", wait)
	h.fake.WaitAck(t, "bad2", wait)
	h.fake.Send(t, "Ev10", slacktest.Message("U1", "D1", "im", "1.1", "still there?"))
	h.expectPost(t, "echo: still there?")
}

func TestToolHintsInThread(t *testing.T) {
	yes := true
	release := make(chan struct{})
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, SendToolHints: &yes}}, func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
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
	h.fake.Send(t, "Ev1", slacktest.AppMention("U1", "C1", "7.7", "<@UBOT> go"))
	if c := h.expectPost(t, "`read src/main.go`"); c.Fields["thread_ts"] != "7.7" {
		t.Errorf("hint thread_ts = %q", c.Fields["thread_ts"])
	}
	close(release) // the answer comes after the hint, as when a tool runs
	h.expectPost(t, "done")
}

func TestValidate(t *testing.T) {
	ok := slack.Config{Common: channelconfig.Common{Enabled: true}, BotToken: "xoxb-1", AppToken: "xapp-1"}
	tests := []struct {
		name   string
		change func(*slack.Config)
		key    string
	}{
		{"valid", func(*slack.Config) {}, ""},
		{"disabled needs nothing", func(c *slack.Config) { *c = slack.Config{} }, ""},
		{"bot token", func(c *slack.Config) { c.BotToken = "" }, "channels.slack.botToken"},
		{"app token", func(c *slack.Config) { c.AppToken = "xoxb-2" }, "channels.slack.appToken"},
		{"mode", func(c *slack.Config) { c.Mode = "http" }, "channels.slack.mode"},
		{"group policy", func(c *slack.Config) { c.GroupPolicy = "all" }, "channels.slack.groupPolicy"},
		{"allowlist without channels", func(c *slack.Config) { c.GroupPolicy = slack.GroupAllowlist }, "channels.slack.groupAllowFrom"},
		{"dm policy", func(c *slack.Config) { c.DM.Policy = "maybe" }, "channels.slack.dm.policy"},
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

func TestFilesAreStored(t *testing.T) {
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	url := h.fake.AddFile("report.pdf", []byte("%PDF-1.4 fake"))
	ev := slacktest.Message("U1", "D1", "im", "3.3", "see attached")
	ev["subtype"] = "file_share"
	ev["files"] = []map[string]any{{"id": "F1", "name": "report.pdf", "mimetype": "application/pdf", "size": 13, "url_private_download": url}}
	h.fake.Send(t, "Ev1", ev)
	in := <-h.worker.Inbound
	if len(in.GetMedia()) != 1 || in.GetMedia()[0].GetMimeType() != "application/pdf" {
		t.Fatalf("inbound media = %v", in.GetMedia())
	}
	blobs, _ := h.bus.Blobs(context.Background())
	if data, err := blobs.GetBytes(context.Background(), in.GetMedia()[0].GetObject()); err != nil || string(data) != "%PDF-1.4 fake" {
		t.Errorf("stored %q, %v", data, err)
	}
}
