package slack_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"fmt"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack/slacktest"
	"github.com/nats-io/nats.go"
)

const wait = 10 * time.Second

type harness struct {
	adaptertest.Env
	fake *slacktest.Server
}

func start(t *testing.T, cfg slack.Config, script workertest.Script, opts ...workertest.Option) *harness {
	t.Helper()
	h := &harness{Env: adaptertest.NewEnv(t, script, opts...), fake: slacktest.New(t)}
	runAdapter(t, h.Bus, h.fake, cfg, slog.New(slog.DiscardHandler))
	return h
}

// runAdapter runs a gateway with a Slack adapter against fake and waits
// until it is connected; stop stops the gateway.
func runAdapter(t *testing.T, b *bus.Bus, fake *slacktest.Server, cfg slack.Config, log *slog.Logger) (stop func()) {
	t.Helper()
	cfg.Enabled, cfg.BotToken, cfg.AppToken, cfg.APIURL = true, "xoxb-test", "xapp-test", fake.APIURL
	stop = gatewaytest.Run(t, b, log, func(ctx context.Context, deps adapterdeps.Deps, log *slog.Logger) (gateway.Adapter, error) {
		return slack.New(ctx, cfg, deps, slack.WithLogger(log))
	})
	fake.WaitConnected(t, wait)
	return stop
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
	in := h.Worker.Next(t)
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
	in := h.Worker.Next(t)
	if in.GetSessionKey() != "slack:C1:200.5" {
		t.Errorf("session key = %q", in.GetSessionKey())
	}
	h.fake.Send(t, "Ev4", slacktest.Message("U2", "D2", "im", "201.0", "sentinel"))
	if got := h.Worker.ContentsUntil(t, "sentinel", wait); len(got) != 1 {
		t.Errorf("worker got %q after the mention, want only the sentinel", got)
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

// TestWithinLimit: progress, tool hints and every piece of a reply are
// within Slack's 40,000 characters once rendered (the fake refuses more
// with msg_too_long, as Slack does), however much escaping or a table's
// padding adds.
func TestWithinLimit(t *testing.T) {
	table := adaptertest.PaddedTable(120, 200)
	progress, hint, final := nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS, nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT, nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL
	tests := []adaptertest.LimitCase{
		{Name: "short progress", Kind: progress, Content: "looking it up", Pieces: 1},
		{Name: "long progress", Kind: progress, Content: strings.Repeat("a", 50000), Pieces: 1},
		{Name: "progress of ampersands", Kind: progress, Content: strings.Repeat("&", 10000), Pieces: 1},
		{Name: "progress with a padded table", Kind: progress, Content: table, Pieces: 1},
		{Name: "long tool hint", Kind: hint, Content: strings.Repeat("x", 50000), Pieces: 1},
		{Name: "tool hint of ampersands", Kind: hint, Content: strings.Repeat("&", 10000), Pieces: 1},
		{Name: "reply of ampersands", Kind: final, Content: strings.Repeat("& ", 4500), Pieces: 3},
		{Name: "reply with a padded table", Kind: final, Content: table, Pieces: 0},
	}
	yes := true
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, SendProgress: &yes, SendToolHints: &yes}}, adaptertest.LimitScript(tests, func(content string) int {
		i, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(content, "<@UBOT>")))
		return i
	}))
	for i, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			h.fake.Send(t, fmt.Sprintf("Ev%d", i), slacktest.AppMention("U1", "C1", fmt.Sprintf("%d.1", i+1), fmt.Sprintf("<@UBOT> %d", i)))
			var texts []string
			for len(texts) == 0 || (tt.Kind == final && !strings.HasSuffix(texts[len(texts)-1], "END")) {
				c := h.fake.Next(t, wait, "chat.postMessage")
				if n := len([]rune(c.Fields["text"])); c.TS == "" {
					t.Fatalf("piece %d of %d characters refused", len(texts), n)
				}
				texts = append(texts, c.Fields["text"])
			}
			adaptertest.WantPieces(t, len(texts), tt.Pieces)
			if tt.Kind == progress && (!strings.HasPrefix(texts[0], "_") || !strings.HasSuffix(texts[0], "_")) {
				t.Errorf("progress not in italics: %.20q…%q", texts[0], texts[0][max(0, len(texts[0])-20):])
			}
		})
	}
}

// TestStreamedTableWithinLimit: an answer streamed by updating one
// message stays within Slack's 40,000 characters once rendered at every
// post and update, and the rest of it follows in messages of its own.
func TestStreamedTableWithinLimit(t *testing.T) {
	table := adaptertest.PaddedTable(120, 200)
	answer := table + "\n\nEND"
	release := make(chan struct{})
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, Streaming: true, StreamEditInterval: 0.1}},
		workertest.Streamed(answer, workertest.Deltas(answer)...), workertest.HoldUntil(release, wait))
	h.fake.Send(t, "Ev1", slacktest.AppMention("U1", "C1", "9.9", "<@UBOT> table please"))
	adaptertest.StreamedPieces(t, release, func() adaptertest.StreamCall {
		c := h.fake.Next(t, wait, "chat.postMessage", "chat.update")
		s := adaptertest.StreamCall{Edit: c.Method == "chat.update", Text: c.Fields["text"]}
		if c.TS == "" {
			s.Refused = fmt.Sprintf("%s of %d characters", c.Method, len([]rune(c.Fields["text"])))
		}
		return s
	})
}

func TestToolHintsInThread(t *testing.T) {
	yes := true
	release := make(chan struct{})
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, SendToolHints: &yes}}, workertest.AfterHint("read src/main.go", "done"), workertest.HoldUntil(release, wait))
	h.fake.Send(t, "Ev1", slacktest.AppMention("U1", "C1", "7.7", "<@UBOT> go"))
	if c := h.expectPost(t, "`read src/main.go`"); c.Fields["thread_ts"] != "7.7" {
		t.Errorf("hint thread_ts = %q", c.Fields["thread_ts"])
	}
	close(release) // the answer comes after the hint, as when a tool runs
	h.expectPost(t, "done")
}

// TestToolHintsEscaped: a hint is the model's text (a tool's arguments):
// it must not reach Slack as a mention, a link or the end of its code span.
func TestToolHintsEscaped(t *testing.T) {
	yes := true
	release := make(chan struct{})
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, SendToolHints: &yes}},
		workertest.AfterHint("fetch <!channel> <https://evil.example|docs> a&b `x`", "done"), workertest.HoldUntil(release, wait))
	h.fake.Send(t, "Ev1", slacktest.AppMention("U1", "C1", "7.7", "<@UBOT> go"))
	h.expectPost(t, "`fetch &lt;!channel&gt; &lt;https://evil.example|docs&gt; a&amp;b 'x'`")
	// A hint is live and best effort: only a held answer is sure to come
	// after it (TestToolHintsInThread).
	close(release)
	h.expectPost(t, "done")
}

func TestValidate(t *testing.T) {
	ok := slack.Config{Common: channelconfig.Common{Enabled: true}, BotToken: "xoxb-1", AppToken: "xapp-1"}
	own := []adaptertest.ConfigCase[slack.Config]{
		{Name: "bot token", Change: func(c *slack.Config) { c.BotToken = "" }, Key: "channels.slack.botToken"},
		{Name: "app token", Change: func(c *slack.Config) { c.AppToken = "xoxb-2" }, Key: "channels.slack.appToken"},
		{Name: "mode", Change: func(c *slack.Config) { c.Mode = "http" }, Key: "channels.slack.mode"},
		{Name: "dm policy", Change: func(c *slack.Config) { c.DM.Policy = "maybe" }, Key: "channels.slack.dm.policy"},
	}
	common := func(c *slack.Config) *channelconfig.Common { return &c.Common }
	adaptertest.Validate(t, ok, append(adaptertest.CommonConfigCases("slack", common), own...))
}

func TestFilesAreStored(t *testing.T) {
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	url := h.fake.AddFile("report.pdf", []byte("%PDF-1.4 fake"))
	ev := slacktest.Message("U1", "D1", "im", "3.3", "see attached")
	ev["subtype"] = "file_share"
	ev["files"] = []map[string]any{{"id": "F1", "name": "report.pdf", "mimetype": "application/pdf", "size": 13, "url_private_download": url}}
	h.fake.Send(t, "Ev1", ev)
	ref, data := adaptertest.Stored(t, h.Bus, h.Worker.Next(t))
	if ref.GetMimeType() != "application/pdf" || string(data) != "%PDF-1.4 fake" {
		t.Errorf("stored %q (%s)", data, ref.GetMimeType())
	}
}

// TestFilesComeOnlyFromSlack is an attack: a file in an event whose URL
// is not on Slack's host (a remote file's URL is whatever its app
// registered) must not be fetched, and above all not with the bot token.
func TestFilesComeOnlyFromSlack(t *testing.T) {
	h := start(t, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	tokens := make(chan string, 10)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokens <- r.Header.Get("Authorization")
		_, _ = w.Write([]byte("stolen"))
	}))
	defer other.Close()
	tests := []struct{ name, url string }{
		{"another host", strings.Replace(other.URL, "127.0.0.1", "localhost", 1) + "/files/x"},
		{"another port of the host", other.URL + "/files/x"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := fmt.Sprintf("5.%d", i)
			ev := slacktest.Message("U1", "D1", "im", ts, "see attached")
			ev["subtype"] = "file_share"
			ev["files"] = []map[string]any{{"id": "F9", "name": "x.txt", "mimetype": "text/plain", "size": 6, "url_private_download": tt.url}}
			h.fake.Send(t, "EvX"+ts, ev)
			in := h.Worker.Next(t)
			if len(in.GetMedia()) != 0 || !strings.Contains(in.GetContent(), "[attachment x.txt not downloaded]") {
				t.Errorf("inbound %q with %d media, want the note and none", in.GetContent(), len(in.GetMedia()))
			}
			select {
			case auth := <-tokens:
				t.Errorf("the gateway fetched %s (Authorization %q)", tt.url, auth)
			default:
			}
		})
	}
}

// TestAdapter runs the scenarios every adapter passes.
func TestAdapter(t *testing.T) {
	adaptertest.Run(t, adaptertest.Platform{Limit: markup.SlackLimit, Group: "C1", Allowlist: true, Start: startSuite})
}

// users are the scenarios' users as Slack user ids.
var users = map[string]string{adaptertest.Owner: "UOWNER", adaptertest.Stranger: "UX", adaptertest.Alice: "U1"}

type suiteFake struct {
	*slacktest.Server
	*adaptertest.Restarter
}

func (f suiteFake) DM(t *testing.T, n int, user, text string) (id, chat string) {
	u := users[user]
	id, chat = fmt.Sprintf("Ev%d", n), "D"+u
	f.Send(t, id, slacktest.Message(u, chat, "im", fmt.Sprintf("%d.1", n), text))
	return id, chat
}

func (f suiteFake) Group(t *testing.T, n int, user, text string, mention bool) {
	ts := fmt.Sprintf("%d.1", n)
	if mention {
		f.Send(t, fmt.Sprintf("Ev%d", n), slacktest.AppMention(users[user], "C1", ts, "<@"+slacktest.BotUserID+"> "+text))
		return
	}
	f.Send(t, fmt.Sprintf("Ev%d", n), slacktest.Message(users[user], "C1", "channel", ts, text))
}

func (f suiteFake) Next(t *testing.T) adaptertest.Sent {
	t.Helper()
	c := f.Server.Next(t, adaptertest.Wait, "chat.postMessage")
	return adaptertest.Sent{
		Chat: c.Fields["channel"], Text: c.Fields["text"], At: c.At,
		Refused: c.TS == "", Quotes: c.Fields["thread_ts"] != "",
	}
}

func (f suiteFake) RateLimit(t *testing.T, after int) time.Duration {
	f.Pass("chat.postMessage", after)
	f.Fail("chat.postMessage", slacktest.Failure{Status: 429, RetryAfter: 1})
	return time.Second
}

func (f suiteFake) Malformed(t *testing.T) ([]string, int) {
	f.Raw(t, `{"type":"events_api","envelope_id":"bad1","payload":{"event":"not an object"}}`)
	f.Raw(t, `{"type":"events_api","envelope_id":"bad2","payload":{"event_id":"Ev9","event":{"type":"message"}}}`)
	f.Raw(t, `{"type":"mystery","envelope_id":"bad3"}`)
	f.Raw(t, `not json at all`)
	f.WaitAck(t, "bad1", adaptertest.Wait)
	f.WaitAck(t, "bad2", adaptertest.Wait)
	return []string{"dropping malformed Slack"}, 2
}

// startSuite runs the adapter for a scenario.
func startSuite(t *testing.T, b *bus.Bus, common channelconfig.Common, log *slog.Logger) adaptertest.Fake {
	f := suiteFake{Server: slacktest.New(t)}
	f.Restarter = adaptertest.NewConnectedRestarter(t, f.Server, func() func() {
		return runAdapter(t, b, f.Server, slack.Config{Common: common}, log)
	})
	return f
}

// TestEventStoredAfterAnOutage: Slack's envelope is acknowledged before
// the event is stored, so Slack never sends it again. An event that meets
// a store with no inbound stream listening (nats: no responders, as while
// a stream has no leader) is tried again until it is stored; before, it
// was logged and lost. The outage is a subscriber that answers the
// inbound subject as the server does when no stream listens, so that the
// test sees each try.
func TestEventStoredAfterAnOutage(t *testing.T) {
	env := adaptertest.NewEnv(t, workertest.Echo)
	fake := slacktest.New(t)
	runAdapter(t, env.Bus, fake, slack.Config{Common: channelconfig.Common{AllowFrom: []string{"U1"}}}, slog.New(slog.DiscardHandler))
	ctx := t.Context()
	st, err := env.Bus.JS.Stream(ctx, env.Bus.Space.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	subjects := info.Config.Subjects
	out := info.Config
	out.Subjects = []string{"outage.nothing"}
	if _, err := env.Bus.JS.UpdateStream(ctx, out); err != nil {
		t.Fatal(err)
	}
	tries := make(chan struct{}, 64)
	sub, err := env.Bus.NC.Subscribe(env.Bus.Space.Inbound(slack.Channel, "D1"), func(m *nats.Msg) {
		noResponders := nats.NewMsg(m.Reply)
		noResponders.Header.Set("Status", "503")
		_ = m.RespondMsg(noResponders)
		select {
		case tries <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	fake.WaitAck(t, fake.Send(t, "EvOut", slacktest.Message("U1", "D1", "im", "100.9", "kept?")), wait)
	// More tries than nats.go's own publish makes (three, 250 ms apart),
	// so that ours are seen.
	for range 4 {
		bustest.Receive(t, tries, wait)
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	out.Subjects = subjects
	if _, err := env.Bus.JS.UpdateStream(ctx, out); err != nil {
		t.Fatal(err)
	}
	if in := env.Worker.Next(t); in.GetId() != "EvOut" || in.GetContent() != "kept?" {
		t.Errorf("inbound = %v, want the event sent during the outage", in)
	}
}
