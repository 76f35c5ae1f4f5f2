package discord_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"fmt"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord/discordtest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

const (
	token = "TEST.discord.token"
	wait  = 10 * time.Second

	create = "POST /channels/{id}/messages"
	edit   = "PATCH /channels/{id}/messages/{id}"
	typing = "POST /channels/{id}/typing"

	dmChannel    = "300000000000000001"
	guildChannel = "300000000000000002"
	guild        = "400000000000000001"
	alice        = "500000000000000001"
	stranger     = "500000000000000066"
	botUser      = "900000000000000001" // discordtest's bot
)

type harness struct {
	adaptertest.Env
	fake *discordtest.Server
}

// start runs a gateway with a Discord adapter against a fake Discord, and
// a fake worker answering with script.
func start(t *testing.T, cfg discord.Config, script workertest.Script, opts ...workertest.Option) *harness {
	t.Helper()
	h := &harness{Env: adaptertest.NewEnv(t, script, opts...), fake: discordtest.New(t, token)}
	runAdapter(t, h.Bus, h.fake, cfg, slog.New(slog.DiscardHandler))
	h.fake.WaitConnected(t, wait)
	return h
}

// runAdapter runs a gateway with a Discord adapter and returns a function
// that stops it.
func runAdapter(t *testing.T, b *bus.Bus, fake *discordtest.Server, cfg discord.Config, log *slog.Logger) func() {
	t.Helper()
	cfg.Enabled, cfg.Token, cfg.APIBase = true, token, fake.URL
	return gatewaytest.Run(t, b, log, func(ctx context.Context, deps adapterdeps.Deps, log *slog.Logger) (gateway.Adapter, error) {
		return discord.New(ctx, cfg, deps, discord.WithLogger(log), discord.WithTyping(time.Second, 5*time.Second))
	})
}

func (h *harness) dm(id, text string) discordtest.Message {
	return discordtest.Message{ID: id, ChannelID: dmChannel, AuthorID: alice, Username: "alice", Content: text}
}

func (h *harness) expectCreate(t *testing.T, want string) discordtest.Call {
	t.Helper()
	c := h.fake.Next(t, wait, create)
	if c.Content() != want {
		t.Fatalf("created message %q, want %q", c.Content(), want)
	}
	return c
}

func TestConversation(t *testing.T) {
	release := make(chan struct{})
	h := start(t, discord.Config{Common: channelconfig.Common{AllowFrom: []string{alice}}}, func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{workertest.Final("**Hi** " + in.GetContent())}
	}, workertest.HoldUntil(release, wait))
	if got := h.fake.Intents(); got&discordtest.IntentMessageContent == 0 {
		t.Errorf("IDENTIFY intents %b lack MESSAGE_CONTENT", got)
	}
	h.fake.Send(h.dm("600000000000000001", "hello @everyone"))
	in := h.Worker.Next(t)
	if in.GetId() != "600000000000000001" || in.GetChatId() != dmChannel || in.GetSenderId() != alice ||
		in.GetMetadata()["message_id"] != "600000000000000001" || in.GetSenderName() != "alice" {
		t.Errorf("inbound = %v", in)
	}
	if c := h.fake.Next(t, wait, typing); c.ChannelID != dmChannel {
		t.Errorf("typing in %s", c.ChannelID)
	}
	close(release)
	c := h.expectCreate(t, "**Hi** hello @everyone")
	ref, _ := c.Body["message_reference"].(map[string]any)
	if c.ChannelID != dmChannel || ref["message_id"] != "600000000000000001" {
		t.Errorf("reply in %s with message_reference %v, want a reply to the asking message", c.ChannelID, c.Body["message_reference"])
	}
	am, _ := c.Body["allowed_mentions"].(map[string]any)
	if parse, ok := am["parse"].([]any); !ok || len(parse) != 0 {
		t.Errorf("allowed_mentions = %v, want no pings", c.Body["allowed_mentions"])
	}
	if c.Body["nonce"] == "" || c.Body["enforce_nonce"] != true {
		t.Errorf("nonce %v enforce_nonce %v", c.Body["nonce"], c.Body["enforce_nonce"])
	}
}

// TestUserNamesDoNotPassForIDs is an attack on allowFrom, which lists
// user ids or user names: a Discord user name may be all digits, so a
// stranger could name themselves after an allowed user's id. Only the
// id itself passes for an id; names still pass for names.
func TestUserNamesDoNotPassForIDs(t *testing.T) {
	h := start(t, discord.Config{Common: channelconfig.Common{AllowFrom: []string{alice, "bob"}}}, workertest.Echo)
	h.fake.Send(discordtest.Message{ID: "600000000000000010", ChannelID: dmChannel, AuthorID: stranger, Username: alice, Content: "posing as alice"})
	h.fake.Send(discordtest.Message{ID: "600000000000000011", ChannelID: dmChannel, AuthorID: "500000000000000077", Username: "bob", Content: "bob by name"})
	h.fake.Send(h.dm("600000000000000012", "sentinel"))
	if got := h.Worker.ContentsUntil(t, "sentinel", wait); len(got) != 2 || got[0] != "bob by name" {
		t.Errorf("worker got %q, want bob's message and the sentinel only", got)
	}
}

// TestGroupMentions: what counts as addressing the bot in a guild channel
// besides a mention (adaptertest's GroupPolicy), and bots never do.
func TestGroupMentions(t *testing.T) {
	tests := []struct {
		name    string
		cfg     discord.Config
		msg     discordtest.Message
		want    string // "" means no reply
		channel string
	}{
		{"nickname mention", discord.Config{}, discordtest.Message{Content: "<@!" + botUser + "> ping"}, "echo: ping", guildChannel},
		{"reply to the bot", discord.Config{}, discordtest.Message{Content: "and then?", ReplyTo: "700000000000000001", ReplyToAuthor: botUser}, "echo: and then?", guildChannel},
		{"bots are ignored", discord.Config{Common: channelconfig.Common{GroupPolicy: channelconfig.GroupOpen}}, discordtest.Message{Content: "beep", Bot: true}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.AllowFrom = []string{"*"}
			h := start(t, tt.cfg, workertest.Echo)
			m := tt.msg
			m.ID, m.ChannelID, m.GuildID, m.AuthorID, m.Username = "600000000000000001", guildChannel, guild, alice, "alice"
			h.fake.Send(m)
			h.fake.Send(h.dm("600000000000000002", "sentinel"))
			want := 1
			if tt.want != "" {
				want = 2
			}
			if got := h.Worker.ContentsUntil(t, "sentinel", wait); len(got) != want {
				t.Errorf("worker got %q", got)
			}
			got := map[string]string{}
			for range want {
				c := h.fake.Next(t, wait, create)
				got[c.Content()] = c.ChannelID
			}
			if got["echo: sentinel"] != dmChannel || (tt.want != "" && got[tt.want] != tt.channel) {
				t.Errorf("replies = %v, want %q in %s", got, tt.want, tt.channel)
			}
		})
	}
}

// TestProgressWithinLimit: progress is shown in italics with its
// backslashes and asterisks escaped, cut so that Discord takes it (the
// fake refuses over 2,000 characters, as Discord does) and never between
// an escape and what it escapes.
func TestProgressWithinLimit(t *testing.T) {
	tests := []struct {
		name, progress, want string
	}{
		{"short", "looking it up", "*looking it up*"},
		{"asterisks double when escaped", strings.Repeat("*", 1998), "*" + strings.Repeat(`\*`, 998) + "…*"},
		{"cut after a whole escape", "a" + strings.Repeat("*", 1998), "*a" + strings.Repeat(`\*`, 998) + "…*"},
		{"trailing backslash", `saved to C:\`, `*saved to C:\\*`},
		{"backslashes cut", strings.Repeat(`\`, 1998), "*" + strings.Repeat(`\\`, 998) + "…*"},
		{"emoji outside the BMP", strings.Repeat("😀*", 1000), "*" + strings.Repeat(`😀\*`, 499) + "…*"},
	}
	yes := true
	h := start(t, discord.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, SendProgress: &yes}}, func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		i, _ := strconv.Atoi(in.GetContent())
		return []*nanofleetv1.OutboundMessage{workertest.Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS, tests[i].progress)}
	})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.fake.Send(h.dm(fmt.Sprintf("6000000000000001%02d", i), strconv.Itoa(i)))
			c := h.fake.Next(t, wait, create)
			if c.Status != 200 || c.Content() != tt.want {
				t.Errorf("sent %d characters ending %q, status %d; want %d ending %q", len([]rune(c.Content())), adaptertest.Tail(c.Content()), c.Status, len([]rune(tt.want)), adaptertest.Tail(tt.want))
			}
		})
	}
}

func TestAttachmentIsStored(t *testing.T) {
	h := start(t, discord.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.Echo)
	img := bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 100)
	url := h.fake.AddFile("cat.png", img)
	m := h.dm("600000000000000001", "look")
	m.Attachments = []discordtest.Attachment{{ID: "800000000000000001", Filename: "cat.png", ContentType: "image/png", URL: url, Size: len(img)}}
	h.fake.Send(m)
	in := h.Worker.Next(t)
	if in.GetContent() != "look" {
		t.Errorf("inbound = %v", in)
	}
	ref, data := adaptertest.Stored(t, h.Bus, in)
	if !bytes.Equal(data, img) || ref.GetMimeType() != "image/png" || ref.GetName() != "cat.png" {
		t.Errorf("stored %d bytes, mime %q, name %q", len(data), ref.GetMimeType(), ref.GetName())
	}
}

// TestTakeoverAfterCrash: the gateway holding the bot's connection dies
// (its NATS connection and its WebSocket drop, its lease is never
// released); another takes over once that lease expires and resumes the
// session, so the events sent meanwhile are answered, once each.
func TestTakeoverAfterCrash(t *testing.T) {
	fake := discordtest.New(t, token)
	fake.BotDiscriminator = "0042"
	srv := bustest.StartServer(t)
	b1, b2 := srv.Connect(t, "", channels.Assets), srv.Connect(t, "", channels.Assets)
	w := workertest.Start(t, b2, workertest.Echo)
	first := &gatewaytest.Logs{}
	second := &gatewaytest.Logs{}
	stopFirst := runAdapter(t, b1, fake, discord.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, slog.New(slog.NewTextHandler(first, &slog.HandlerOptions{Level: slog.LevelDebug})))
	first.WaitFor(t, "this gateway holds the account's connection lease", wait)
	fake.WaitConnected(t, wait)
	// The status is written before the connection is made.
	if rec := adaptertest.Status(t, b1, discord.Channel); rec.Account != "nanobot#0042" || rec.State != status.Connected {
		t.Errorf("status = %+v, want connected as nanobot#0042", rec)
	}
	runAdapter(t, b2, fake, discord.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, slog.New(slog.NewTextHandler(second, &slog.HandlerOptions{Level: slog.LevelDebug})))
	second.WaitFor(t, "another gateway holds this account's connection", wait)

	fake.Send(discordtest.Message{ID: "600000000000000001", ChannelID: dmChannel, AuthorID: alice, Content: "one"})
	if c := fake.Next(t, wait, create); c.Content() != "echo: one" {
		t.Fatalf("before the crash got %q", c.Content())
	}
	leases := bustest.WatchLeases(t, b2, discord.Channel+"-conn-")
	// The crash: no lease release, no close frame.
	b1.NC.Close()
	fake.Kill()
	stopFirst()
	fake.Send(discordtest.Message{ID: "600000000000000002", ChannelID: dmChannel, AuthorID: alice, Content: "two"})
	fake.Send(discordtest.Message{ID: "600000000000000003", ChannelID: dmChannel, AuthorID: alice, Content: "three"})
	// The second gateway takes over because the dead one's lease expired:
	// the lease shows it as the new holder, written after the TTL.
	_, to := leases.TakeoverAfterExpiry(t, bustest.TestLayout().LeaseTTL, wait)
	second.WaitFor(t, "this gateway holds the account's connection lease", wait)
	second.WaitFor(t, "owner="+to, wait)
	got := map[string]int{}
	for got["echo: two"] == 0 || got["echo: three"] == 0 {
		got[fake.Next(t, wait, create).Content()]++
	}
	if fake.Resumes() == 0 {
		t.Error("the second gateway did not resume the session")
	}
	// Nothing answered twice: the worker took each message once, and each
	// reply was created once.
	if in := inboundIDs(t, w, 3); in["600000000000000001"] != 1 || in["600000000000000002"] != 1 || in["600000000000000003"] != 1 {
		t.Errorf("worker took %v", in)
	}
	created := map[string]int{}
	for _, c := range fake.Created() {
		created[c.Content()]++
	}
	for _, k := range []string{"echo: one", "echo: two", "echo: three"} {
		if created[k] != 1 {
			t.Errorf("created %v, want each answer once", created)
			break
		}
	}
}

// inboundIDs drains the worker's inbound messages, expecting at least n.
func inboundIDs(t *testing.T, w *workertest.Worker, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for i := 0; ; i++ {
		timeout := 200 * time.Millisecond
		if i < n {
			timeout = wait
		}
		select {
		case in := <-w.Inbound:
			got[in.GetId()]++
		case <-time.After(timeout):
			if i < n {
				t.Fatalf("worker took %v, want %d messages", got, n)
			}
			return got
		}
	}
}

// TestStreamingWithTwoGateways: two gateways run the channel; the deltas
// of a turn reach both, one message is created and edited, and the final
// text is the answer, whichever gateway delivers the reply.
func TestStreamingWithTwoGateways(t *testing.T) {
	fake := discordtest.New(t, token)
	srv := bustest.StartServer(t)
	b1, b2 := srv.Connect(t, "", channels.Assets), srv.Connect(t, "", channels.Assets)
	answer := strings.TrimSpace(strings.Repeat("streamed words ", 15))
	workertest.Start(t, b1, workertest.Streamed(answer, workertest.Deltas(answer)...))
	cfg := discord.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, Streaming: true, StreamEditInterval: 0.2}}
	logs := &gatewaytest.Logs{}
	runAdapter(t, b1, fake, cfg, slog.New(slog.NewTextHandler(logs, nil)))
	logs.WaitFor(t, "this gateway holds the account's connection lease", wait)
	runAdapter(t, b2, fake, cfg, slog.New(slog.NewTextHandler(logs, nil)))
	logs.WaitFor(t, "another gateway holds this account's connection", wait) // both follow the streams
	fake.WaitConnected(t, wait)
	for i, id := range []string{"600000000000000001", "600000000000000002", "600000000000000003"} {
		fake.Send(discordtest.Message{ID: id, ChannelID: dmChannel, AuthorID: alice, Content: "stream " + strconv.Itoa(i)})
	}
	// Three turns, one message each, each ending with the whole answer.
	deadline := time.Now().Add(wait)
	for {
		created, finished := fake.Created(), 0
		for _, c := range created {
			if fake.Text(c.MessageID) == answer {
				finished++
			}
		}
		if len(created) > 3 {
			t.Fatalf("%d messages created for 3 turns", len(created))
		}
		if finished == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %d messages, %d with the whole answer", wait, len(created), finished)
		}
		select {
		case <-fake.Calls():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func TestOutboundAttachmentIsUploaded(t *testing.T) {
	img := bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 100)
	h := start(t, discord.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		m := workertest.Final("here it is")
		m.Media = []*nanofleetv1.MediaRef{{Object: "test/chart.png", Name: "chart.png", MimeType: "image/png"}}
		return []*nanofleetv1.OutboundMessage{m}
	})
	blobs, err := h.Bus.Blobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blobs.PutBytes(t.Context(), "test/chart.png", img); err != nil {
		t.Fatal(err)
	}
	h.fake.Send(h.dm("600000000000000001", "a chart please"))
	h.expectCreate(t, "here it is")
	c := h.fake.Next(t, wait, create)
	if !bytes.Equal(c.Files["chart.png"], img) || c.Status != 200 {
		t.Errorf("upload %d: files %v", c.Status, len(c.Files))
	}
}

// TestRefusalsStopTheAdapter: a rejected token, or the message-content
// intent not enabled for the bot, stop the adapter with an error naming
// the cause instead of reconnecting forever.
func TestRefusalsStopTheAdapter(t *testing.T) {
	tests := []struct {
		name, token string
		disallowed  int
		want        string
	}{
		{"token", "wrong.token", 0, "bot token rejected"},
		{"intent", token, discordtest.IntentMessageContent, "message content intent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := discordtest.New(t, token)
			fake.Disallowed = tt.disallowed
			adaptertest.Refused(t, tt.want, func(ctx context.Context, b *bus.Bus, gate *access.Gate, log *slog.Logger) (gateway.Adapter, error) {
				return discord.New(ctx, discord.Config{Common: channelconfig.Common{Enabled: true}, Token: tt.token, APIBase: fake.URL}, discord.Deps{Bus: b, Gate: gate}, discord.WithLogger(log))
			})
		})
	}
}

// TestAdapter runs the scenarios every adapter passes.
func TestAdapter(t *testing.T) {
	adaptertest.Run(t, adaptertest.Platform{Limit: discord.Limit, Quotes: adaptertest.QuotesFirst, Group: guildChannel, Allowlist: true, Start: startSuite})
}

// users are the scenarios' users as Discord user ids, and the channels
// of their DMs with the bot.
var users = map[string]struct{ id, dm string }{
	adaptertest.Owner:    {"500000000000000010", "300000000000000010"},
	adaptertest.Stranger: {stranger, "300000000000000066"},
	adaptertest.Alice:    {alice, dmChannel},
}

type suiteFake struct {
	*discordtest.Server
	*adaptertest.Restarter
}

func (f suiteFake) DM(t *testing.T, n int, user, text string) (id, chat string) {
	u := users[user]
	id = fmt.Sprintf("6000000000000000%02d", n)
	f.Send(discordtest.Message{ID: id, ChannelID: u.dm, AuthorID: u.id, Username: user, Content: text})
	return id, u.dm
}

func (f suiteFake) Group(t *testing.T, n int, user, text string, mention bool) {
	m := discordtest.Message{ID: fmt.Sprintf("6000000000000000%02d", n), ChannelID: guildChannel, GuildID: guild, AuthorID: users[user].id, Username: user, Content: text}
	if mention {
		m.Content, m.Mentions = "<@"+botUser+"> "+text, []string{botUser}
	}
	f.Send(m)
}

func (f suiteFake) Next(t *testing.T) adaptertest.Sent {
	t.Helper()
	c := f.Server.Next(t, adaptertest.Wait, create)
	_, quotes := c.Body["message_reference"]
	nonce, _ := c.Body["nonce"].(string)
	return adaptertest.Sent{Chat: c.ChannelID, Text: c.Content(), At: c.At, Refused: c.Status == 429, Quotes: quotes, Key: nonce}
}

func (f suiteFake) RateLimit(t *testing.T, after int) time.Duration {
	f.Pass(create, after)
	f.Fail(create, discordtest.TooManyRequests(time.Second))
	return time.Second
}

func (f suiteFake) Malformed(t *testing.T) ([]string, int) {
	f.Dispatch("MESSAGE_CREATE", []byte(`{"id": "600000000000000001", "content": "no channel or author"}`))
	f.Dispatch("MESSAGE_CREATE", []byte(`"not an object"`))
	f.Dispatch("MESSAGE_CREATE", []byte(`{"id": 5, "channel_id": [], "author": "x"}`))
	return []string{"dropping malformed Discord message"}, 1
}

// startSuite runs the adapter for a scenario.
func startSuite(t *testing.T, b *bus.Bus, common channelconfig.Common, log *slog.Logger) adaptertest.Fake {
	f := suiteFake{Server: discordtest.New(t, token)}
	// The fake keeps the events of a session whose connection is down
	// for its resume, so a new gateway need not be waited for.
	f.Restarter = adaptertest.NewRestarter(func() func() {
		return runAdapter(t, b, f.Server, discord.Config{Common: common}, log)
	})
	f.WaitConnected(t, wait)
	return f
}

// TestNoConnectionOutlivesTheAdapter: disgo reconnects a dropped
// connection on its own, with a context nobody can cancel. An adapter
// stopped (its lease lost) while Discord refused that reconnection left
// it running: once Discord took connections again, a session nobody
// held came up and resumed the session the lease's next holder resumes.
// Now such a connection is closed at its first event.
func TestNoConnectionOutlivesTheAdapter(t *testing.T) {
	env := adaptertest.NewEnv(t, workertest.Echo)
	fake := discordtest.New(t, token)
	stop := runAdapter(t, env.Bus, fake, discord.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, slog.New(slog.DiscardHandler))
	fake.WaitConnected(t, wait)
	fake.Refuse(true)
	fake.Kill() // disgo starts reconnecting, refused
	bustest.Eventually(t, wait, func() error {
		if _, _, refused := fake.Conns(); refused == 0 {
			return errors.New("disgo has not tried to reconnect yet")
		}
		return nil
	})
	stop()
	_, before, _ := fake.Conns()
	fake.Refuse(false)
	// disgo's next try comes 2 to 6 s later.
	bustest.Eventually(t, 30*time.Second, func() error {
		if _, accepted, _ := fake.Conns(); accepted == before {
			return errors.New("no reconnection yet")
		}
		return nil
	})
	bustest.Eventually(t, wait, func() error {
		if open, _, _ := fake.Conns(); open > 0 {
			return fmt.Errorf("%d gateway connection(s) open after the adapter stopped", open)
		}
		return nil
	})
}
