package discord_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"fmt"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord/discordtest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
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

// TestAttachmentFailures: a reply's attachments are counted as pieces
// after its text, so the retry after a 5xx on the second attachment sends
// that attachment only (no request repeats one Discord took: its nonce
// would hide the repeat only for a few minutes); an upload Discord
// refuses (a 413, as for a file over the server's upload limit, or a 400)
// is not retried, the chat is told and the reply goes on.
func TestAttachmentFailures(t *testing.T) {
	refs := []*nanofleetv1.MediaRef{
		{Object: "t/a.pdf", Name: "a.pdf", MimeType: "application/pdf"},
		{Object: "t/b.pdf", Name: "b.pdf", MimeType: "application/pdf"},
	}
	data := [][]byte{[]byte("%PDF-1.4 a"), []byte("%PDF-1.4 b")}
	a, b := map[string][]byte{"a.pdf": data[0]}, map[string][]byte{"b.pdf": data[1]}
	type request struct {
		text   string
		files  map[string][]byte
		status int
	}
	tests := []struct {
		name   string
		passed int // requests answered before the failure
		fail   discordtest.Failure
		want   []request // every message request, in order
	}{
		{"second attachment failing once", 2, discordtest.Failure{Status: 500, Message: "500: Internal Server Error"},
			[]request{{"here", nil, 200}, {"", a, 200}, {"", b, 500}, {"", b, 200}}},
		{"first attachment too large", 1, discordtest.Failure{Status: 413, Message: "Request entity too large"},
			[]request{{"here", nil, 200}, {"", a, 413}, {"[attachment a.pdf was refused by Discord; not sent]", nil, 200}, {"", b, 200}}},
		{"first attachment refused", 1, discordtest.Failure{Status: 400, Message: "Invalid Form Body"},
			[]request{{"here", nil, 200}, {"", a, 400}, {"[attachment a.pdf was refused by Discord; not sent]", nil, 200}, {"", b, 200}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, discord.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.WithMedia("here", refs...))
			workertest.StoreMedia(t, h.Bus, refs, data)
			h.fake.Pass(create, tt.passed)
			h.fake.Fail(create, tt.fail)
			h.fake.Send(h.dm("600000000000000001", "two files please"))
			for i, w := range tt.want {
				c := h.fake.Next(t, wait, create)
				if c.Content() != w.text || !maps.EqualFunc(c.Files, w.files, bytes.Equal) || c.Status != w.status || c.Duplicate {
					t.Fatalf("request %d: %q with files %q, status %d, duplicate %v; want %q with %q, status %d",
						i, c.Content(), c.Files, c.Status, c.Duplicate, w.text, w.files, w.status)
				}
			}
			gatewaytest.WaitDelivered(t, h.Bus, discord.Channel, 1, wait)
			h.fake.None(t, create)
		})
	}
}

// TestUnsendableAttachmentIsANote: an attachment the store no longer
// holds, or one announced over Discord's upload limit, can never be sent,
// so it is not retried (and the oversized one not uploaded): the chat gets
// the text, a note naming the attachment and the next attachment, each
// once.
func TestUnsendableAttachmentIsANote(t *testing.T) {
	doc := []byte("%PDF-1.4 b")
	tests := []struct {
		name string
		ref  *nanofleetv1.MediaRef
		data []byte // stored; nil: none
		note string
	}{
		{"gone from the store", &nanofleetv1.MediaRef{Object: "t/gone.pdf", Name: "gone.pdf", MimeType: "application/pdf"}, nil,
			"[attachment gone.pdf is no longer stored; not sent]"},
		{"over the upload limit", &nanofleetv1.MediaRef{Object: "t/huge.zip", Name: "huge.zip", MimeType: "application/zip", Size: discord.UploadLimit + 1}, []byte("PK"),
			"[attachment huge.zip is 25.0 MB, over Discord's 25 MB limit; not sent]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refs := []*nanofleetv1.MediaRef{tt.ref, {Object: "t/b.pdf", Name: "b.pdf", MimeType: "application/pdf"}}
			h := start(t, discord.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, workertest.WithMedia("here", refs...))
			workertest.StoreMedia(t, h.Bus, refs, [][]byte{tt.data, doc})
			h.fake.Send(h.dm("600000000000000001", "two files please"))
			want := []struct {
				text  string
				files map[string][]byte
			}{
				{"here", nil},
				{tt.note, nil},
				{"", map[string][]byte{"b.pdf": doc}},
			}
			for i, w := range want {
				c := h.fake.Next(t, wait, create)
				if c.Content() != w.text || !maps.EqualFunc(c.Files, w.files, bytes.Equal) || c.Status != 200 || c.Duplicate {
					t.Fatalf("request %d: %q with files %q, status %d, duplicate %v; want %q with %q, status 200",
						i, c.Content(), c.Files, c.Status, c.Duplicate, w.text, w.files)
				}
			}
			gatewaytest.WaitDelivered(t, h.Bus, discord.Channel, 1, wait)
			h.fake.None(t, create)
		})
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
