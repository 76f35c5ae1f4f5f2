package discord

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/disgoorg/disgo/discord"
	"github.com/disgoorg/disgo/rest"
	"github.com/disgoorg/snowflake/v2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/editstream"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/typing"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// Channel is the channel name in subjects and session keys.
const Channel = "discord"

// Limit is the length of one Discord message.
const Limit = 2000

// inbox is where inbound messages go; connect.go, which speaks Discord's
// own gateway package, names it this way.
type inbox = gateway.Inbox

// Deps are what the adapter needs from its surroundings.
type Deps = adapterdeps.Deps

// Adapter is the Discord channel. It implements [gateway.LiveAdapter].
type Adapter struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	rest    rest.Rest
	http    *http.Client
	media   *media.Store
	state   jetstream.KeyValue // resumable gateway sessions
	policy  access.Policy
	streams *editstream.Streams // nil unless streaming

	typingEvery, typingMax time.Duration

	sent   *parts.Store
	typing *typing.Indicator

	mu    sync.Mutex
	botID string
}

// Option tunes an adapter, mostly for tests.
type Option func(*Adapter) error

// WithLogger sets the adapter's logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(a *Adapter) error { a.log = observe.OrDiscard(l).With("channel", Channel); return nil }
}

// WithTyping sets how often the typing indicator is renewed and for how
// long at most (defaults 8s and 2m; Discord shows it for 10s).
func WithTyping(every, most time.Duration) Option {
	return func(a *Adapter) error {
		if every <= 0 || most < every {
			return fmt.Errorf("discord: typing every %s for at most %s", every, most)
		}
		a.typingEvery, a.typingMax = every, most
		return nil
	}
}

// bucketSessions is the short name of the bucket of Discord gateway
// sessions.
const bucketSessions = "discord"

// Assets declares the bucket of Discord gateway sessions for
// [bus.Provision].
func Assets(sp subject.Space, _ bus.Layout) bus.Assets {
	return bus.Assets{Buckets: []jetstream.KeyValueConfig{{
		Bucket:      sp.Bucket(bucketSessions),
		Description: "Discord gateway sessions, resumed by the gateway that takes the connection over",
		History:     1,
	}}}
}

// New returns the adapter for cfg, which must be valid and enabled;
// [Assets] must have been provisioned.
func New(ctx context.Context, cfg Config, deps Deps, opts ...Option) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Adapter{
		cfg: cfg, deps: deps, log: slog.New(slog.DiscardHandler),
		http:        &http.Client{Timeout: 2 * time.Minute},
		typingEvery: 8 * time.Second, typingMax: 2 * time.Minute,
		policy: access.Policy{Channel: Channel, AllowFrom: cfg.AllowFrom, DM: cfg.DMPolicy},
	}
	for _, o := range opts {
		if err := o(a); err != nil {
			return nil, err
		}
	}
	base := strings.TrimRight(cfg.APIBase, "/")
	if base == "" {
		base = DefaultAPIBase
	}
	a.rest = rest.New(rest.NewClient(cfg.Token,
		rest.WithURL(base),
		rest.WithHTTPClient(a.http),
		rest.WithLogger(a.log.With("source", "disgo")),
	))
	var err error
	if a.media, err = media.Open(ctx, deps.Bus, cfg.MediaLimit(DefaultMaxMediaBytes)); err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	a.state, err = deps.Bus.KV(ctx, bucketSessions)
	if err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	if a.sent, err = parts.Open(ctx, deps.Bus, parts.WithLogger(a.log)); err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	if cfg.Streaming {
		a.streams, err = editstream.New(ctx, editstream.Config{Channel: Channel, Interval: cfg.EditInterval(time.Second), Limit: Limit}, deps.Bus, streamer{a}, editstream.WithLogger(a.log))
		if err != nil {
			return nil, fmt.Errorf("discord: %w", err)
		}
	}
	a.typing = typing.New(deps.Bus, Channel, a.typingEvery, a.typingMax, typing.WithLogger(a.log))
	return a, nil
}

// Channel returns "discord".
func (a *Adapter) Channel() string { return Channel }

func (a *Adapter) bot() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botID
}

// Deliver sends one durable reply, split at 2000 characters, continuing
// after the pieces an earlier attempt already sent. A streamed answer's
// first piece replaces the streamed message's text.
func (a *Adapter) Deliver(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	kind := msg.GetKind()
	if kind == nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL || kind == nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR {
		a.typing.Stop(msg.GetChatId())
	}
	pieces := markup.Split(msg.GetContent(), Limit)
	start, err := a.streams.Start(ctx, msg, len(pieces), a.sent)
	if err != nil {
		return err
	}
	err = a.sent.Send(ctx, msg.GetId(), start, len(pieces), func(ctx context.Context, i int) error {
		_, err := a.post(ctx, msg, pieces[i], i == 0, nonce(msg.GetId(), i), nil)
		return err
	})
	if err != nil {
		return classify(err)
	}
	for i, m := range msg.GetMedia() {
		if err := a.sendMedia(ctx, msg, i, m); err != nil {
			a.log.Warn("send attachment failed", "chat", msg.GetChatId(), "n", i, "name", m.GetName(), "err", err)
			var de *gateway.DeliveryError
			if errors.As(classify(err), &de) && de.Retryable {
				return de
			}
		}
	}
	return nil
}

// DeliverLive shows progress and tool hints as separate messages when
// enabled; deltas are followed by the streams themselves (see
// internal/editstream).
func (a *Adapter) DeliverLive(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	if !a.cfg.ShowsLive(msg.GetKind(), a.deps.SendProgress, a.deps.SendToolHints) {
		return nil
	}
	var text string
	switch msg.GetKind() {
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS:
		text = "*" + strings.ReplaceAll(truncate(msg.GetContent(), Limit-2), "*", "\\*") + "*"
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT:
		text = "`" + strings.ReplaceAll(truncate(msg.GetContent(), Limit-2), "`", "'") + "`"
	default:
		return nil
	}
	_, err := a.post(ctx, msg, text, false, "", nil)
	if err == nil {
		a.startTyping(msg.GetChatId()) // Discord ends the indicator with a message
	}
	return err
}

// post creates one message in msg's chat; reply makes it a reply to the
// asking message. A non-empty nonce is enforced, so Discord creates the
// message once even when a retry repeats the request.
func (a *Adapter) post(ctx context.Context, msg *nanofleetv1.OutboundMessage, text string, reply bool, nonce string, files []*discord.File) (string, error) {
	ch, err := snowflake.Parse(msg.GetChatId())
	if err != nil {
		return "", gateway.Permanent(fmt.Errorf("chat id %q is not a Discord channel id: %w", msg.GetChatId(), err))
	}
	mc := discord.MessageCreate{
		Content: text, Files: files,
		// Answers never ping @everyone, roles or users, whatever the model
		// wrote; a reply notifies the asker as usual.
		AllowedMentions: &discord.AllowedMentions{Parse: []discord.AllowedMentionType{}, RepliedUser: true},
	}
	if nonce != "" {
		mc.Nonce, mc.EnforceNonce = nonce, true
	}
	if reply && channelconfig.On(a.cfg.ReplyToMessage, true) {
		if id, err := snowflake.Parse(msg.GetMetadata()["message_id"]); err == nil {
			mc.MessageReference = &discord.MessageReference{MessageID: &id, ChannelID: &ch, FailIfNotExists: false}
		}
	}
	m, err := a.rest.CreateMessage(ch, mc, rest.WithCtx(ctx))
	if err != nil {
		return "", err
	}
	return m.ID.String(), nil
}

// sendMedia uploads an attachment from the object store.
func (a *Adapter) sendMedia(ctx context.Context, msg *nanofleetv1.OutboundMessage, i int, m *nanofleetv1.MediaRef) error {
	if m.GetObject() == "" {
		if m.GetUrl() == "" {
			return nil
		}
		_, err := a.post(ctx, msg, m.GetUrl(), false, nonce(msg.GetId()+"/media", i), nil)
		return err
	}
	data, err := a.media.Get(ctx, m.GetObject())
	if err != nil {
		return err
	}
	name := m.GetName()
	if name == "" {
		name = "file"
	}
	_, err = a.post(ctx, msg, "", false, nonce(msg.GetId()+"/media", i), []*discord.File{discord.NewFile(name, "", bytes.NewReader(data))})
	return err
}

// nonce is the idempotency key of piece i of reply id: Discord allows 25
// characters.
func nonce(id string, i int) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(id + "#" + strconv.Itoa(i)))
	return hex.EncodeToString(sum[:])[:25]
}

// classify turns a REST error into a delivery error. disgo has already
// waited out and retried 429s; one that is still there is retried after
// Discord's retry_after.
func classify(err error) error {
	var de *gateway.DeliveryError
	if errors.As(err, &de) {
		return err
	}
	var re rest.Error
	if errors.As(err, &re) && re.Response != nil {
		switch code := re.Response.StatusCode; {
		case code == http.StatusTooManyRequests:
			secs, _ := strconv.ParseFloat(re.Response.Header.Get("Retry-After"), 64)
			return gateway.Retry(err, time.Duration(secs*float64(time.Second)))
		case code >= 500:
			return gateway.Retry(err, 0)
		default:
			return gateway.Permanent(err)
		}
	}
	return gateway.Retry(err, 0)
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// streamer lets [editstream] post and edit Discord messages.
type streamer struct{ a *Adapter }

func (s streamer) Post(ctx context.Context, msg *nanofleetv1.OutboundMessage, text string) (string, error) {
	id, err := s.a.post(ctx, msg, text, true, "", nil)
	return id, limited(err)
}

// limited marks a 429 that disgo's own retries did not get past as a wait
// for the stream, not a failure.
func limited(err error) error {
	if err == nil {
		return nil
	}
	var de *gateway.DeliveryError
	if errors.As(classify(err), &de) && de.RetryAfter > 0 {
		return &editstream.RetryAfter{After: de.RetryAfter, Err: err}
	}
	return err
}

func (s streamer) Edit(ctx context.Context, msg *nanofleetv1.OutboundMessage, id, text string, _ bool) error {
	ch, mid, err := messageIDs(msg, id)
	if err != nil {
		return err
	}
	_, err = s.a.rest.UpdateMessage(ch, mid, discord.MessageUpdate{Content: &text}, rest.WithCtx(ctx))
	return limited(err)
}

func (s streamer) Delete(ctx context.Context, msg *nanofleetv1.OutboundMessage, id string) error {
	ch, mid, err := messageIDs(msg, id)
	if err != nil {
		return err
	}
	return s.a.rest.DeleteMessage(ch, mid, rest.WithCtx(ctx))
}

// messageIDs parses the channel of msg and the streamed message id.
func messageIDs(msg *nanofleetv1.OutboundMessage, id string) (ch, mid snowflake.ID, err error) {
	if ch, err = snowflake.Parse(msg.GetChatId()); err != nil {
		return 0, 0, err
	}
	if mid, err = snowflake.Parse(id); err != nil {
		return 0, 0, err
	}
	return ch, mid, nil
}
