package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/nanofleet/nanofleet/pkg/observe"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/editstream"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/retry"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/typing"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/webhook"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// Channel is the channel name in subjects and session keys.
const Channel = "telegram"

// Deps are what the adapter needs from its surroundings.
type Deps = adapterdeps.Deps

// Adapter is the Telegram channel. It implements [gateway.LiveAdapter].
type Adapter struct {
	cfg         Config
	deps        Deps
	log         *slog.Logger
	bot         *tgbot.Bot
	http        *http.Client
	apiBase     string
	media       *media.Store
	policy      access.Policy
	pollTimeout time.Duration
	typingEvery time.Duration
	typingMax   time.Duration

	sent    *parts.Store
	typing  *typing.Indicator
	streams *editstream.Streams // nil unless streaming
	hook    webhook.Receiver    // Run's inbox, for webhook requests

	mu sync.Mutex
	me *models.User
}

// Option tunes an adapter, mostly for tests.
type Option func(*Adapter) error

// WithLogger sets the adapter's logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(a *Adapter) error { a.log = observe.OrDiscard(l).With("channel", Channel); return nil }
}

// WithPollTimeout sets the long-poll timeout (default 50s).
func WithPollTimeout(d time.Duration) Option {
	return func(a *Adapter) error {
		if d < time.Second {
			return fmt.Errorf("telegram: poll timeout %s is below 1s", d)
		}
		a.pollTimeout = d
		return nil
	}
}

// WithTyping sets how often the typing indicator is renewed and for how
// long at most (defaults 4s and 3m).
func WithTyping(every, most time.Duration) Option {
	return func(a *Adapter) error {
		if every <= 0 || most < every {
			return fmt.Errorf("telegram: typing every %s for at most %s", every, most)
		}
		a.typingEvery, a.typingMax = every, most
		return nil
	}
}

// New returns the adapter for cfg, which must be valid and enabled.
func New(ctx context.Context, cfg Config, deps Deps, opts ...Option) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Adapter{
		cfg: cfg, deps: deps, log: slog.New(slog.DiscardHandler),
		apiBase:     strings.TrimRight(cfg.APIBase, "/"),
		pollTimeout: 50 * time.Second,
		typingEvery: 4 * time.Second,
		typingMax:   3 * time.Minute,
		policy:      access.Policy{Channel: Channel, AllowFrom: cfg.AllowFrom, DM: cfg.DMPolicy},
	}
	if a.apiBase == "" {
		a.apiBase = DefaultAPIBase
	}
	for _, o := range opts {
		if err := o(a); err != nil {
			return nil, err
		}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.Proxy != "" {
		u, _ := url.Parse(cfg.Proxy) // validated
		transport.Proxy = http.ProxyURL(u)
	}
	a.http = &http.Client{Transport: transport, Timeout: a.pollTimeout + 15*time.Second}
	b, err := tgbot.New(cfg.Token,
		tgbot.WithServerURL(a.apiBase),
		tgbot.WithSkipGetMe(),
		tgbot.WithHTTPClient(a.pollTimeout, a.http),
		tgbot.WithErrorsHandler(func(err error) { a.log.Debug("bot library", "err", err) }),
		tgbot.WithDefaultHandler(func(context.Context, *tgbot.Bot, *models.Update) {}),
	)
	if err != nil {
		return nil, fmt.Errorf("telegram: %w", err)
	}
	a.bot = b
	if a.media, err = media.Open(ctx, deps.Bus, cfg.MediaLimit(DefaultMaxMediaBytes)); err != nil {
		return nil, fmt.Errorf("telegram: %w", err)
	}
	a.typing = typing.New(deps.Bus, Channel, a.typingEvery, a.typingMax, typing.WithLogger(a.log))
	if a.sent, err = parts.Open(ctx, deps.Bus, parts.WithLogger(a.log)); err != nil {
		return nil, fmt.Errorf("telegram: %w", err)
	}
	if cfg.Streaming {
		a.streams, err = editstream.New(ctx, editstream.Config{Channel: Channel, Interval: cfg.EditInterval(time.Second), Limit: markup.TelegramLimit}, deps.Bus, streamer{a}, editstream.WithLogger(a.log))
		if err != nil {
			return nil, fmt.Errorf("telegram: %w", err)
		}
	}
	return a, nil
}

// Channel returns "telegram".
func (a *Adapter) Channel() string { return Channel }

// Webhook reports whether the adapter receives updates by webhook, and the
// path to serve [Adapter.WebhookHandler] on.
func (a *Adapter) Webhook() (path string, ok bool) {
	if a.cfg.Webhook.URL == "" {
		return "", false
	}
	u, _ := url.Parse(a.cfg.Webhook.URL) // validated
	if u.Path == "" {
		return "/", true
	}
	return u.Path, true
}

// Run receives updates until ctx ends: by webhook when configured, else by
// long polling while holding the fleet's poller lease for this bot.
func (a *Adapter) Run(ctx context.Context, in gateway.Inbox) error {
	if err := a.identify(ctx); err != nil {
		return err
	}
	a.hook.Serve(ctx, in)
	stop, err := a.typing.Watch(ctx)
	if err != nil {
		return err
	}
	defer stop()
	stopStreams, err := a.streams.Watch(ctx)
	if err != nil {
		return err
	}
	defer stopStreams()
	if _, ok := a.Webhook(); ok {
		return a.runWebhook(ctx)
	}
	return a.runPolling(ctx, in)
}

// identify asks Telegram who the bot is (for mentions), retrying until it
// answers or ctx ends.
func (a *Adapter) identify(ctx context.Context) error {
	return retry.Until(ctx, a.log, "telegram getMe failed, retrying", func(ctx context.Context) error {
		me, err := a.bot.GetMe(ctx)
		if errors.Is(err, tgbot.ErrorUnauthorized) || errors.Is(err, tgbot.ErrorNotFound) {
			return retry.Final(fmt.Errorf("telegram: bot token rejected: %w", err))
		}
		if err != nil {
			return err
		}
		a.mu.Lock()
		a.me = me
		a.mu.Unlock()
		a.log.Info("telegram bot ready", "username", me.Username, "id", me.ID)
		return nil
	})
}

func (a *Adapter) username() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.me == nil {
		return ""
	}
	return a.me.Username
}

func (a *Adapter) botID() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.me == nil {
		return 0
	}
	return a.me.ID
}

// Deliver sends one durable reply, split and rendered, continuing after
// the pieces an earlier attempt already sent.
func (a *Adapter) Deliver(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	chat, thread := msg.GetChatId(), atoi(msg.GetMetadata()["thread_id"])
	if k := msg.GetKind(); k == nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL || k == nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR {
		a.typing.Stop(chat)
	}
	pieces := markup.Split(msg.GetContent(), markup.TelegramLimit)
	replyTo := 0
	if channelconfig.On(a.cfg.ReplyToMessage, true) {
		replyTo = atoi(msg.GetMetadata()["message_id"])
	}
	start, err := a.streams.Start(ctx, msg, len(pieces), a.sent)
	if err != nil {
		return err
	}
	err = a.sent.Send(ctx, msg.GetId(), start, len(pieces), func(ctx context.Context, i int) error {
		if i > 0 {
			return a.send(ctx, chat, thread, 0, pieces[i])
		}
		return a.send(ctx, chat, thread, replyTo, pieces[i])
	})
	if err != nil {
		return classify(err)
	}
	for i, m := range msg.GetMedia() {
		if err := a.sendMedia(ctx, chat, thread, m); err != nil {
			a.log.Warn("send attachment failed", "chat", chat, "n", i, "name", m.GetName(), "err", err)
			if de := classify(err); isRetry(de) {
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
	chat, thread := msg.GetChatId(), atoi(msg.GetMetadata()["thread_id"])
	var html string
	switch msg.GetKind() {
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS:
		html = "<i>" + escape(truncate(msg.GetContent(), markup.TelegramLimit)) + "</i>"
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT:
		html = "<code>" + escape(truncate(msg.GetContent(), markup.TelegramLimit)) + "</code>"
	default:
		return nil
	}
	_, err := a.bot.SendMessage(ctx, &tgbot.SendMessageParams{
		ChatID: chat, MessageThreadID: thread, Text: html, ParseMode: models.ParseModeHTML,
		LinkPreviewOptions: &models.LinkPreviewOptions{IsDisabled: tgbot.True()},
	})
	if err == nil {
		a.startTyping(chat, thread) // the chat action ends with a message
	}
	return err
}

// send sends one piece as HTML, and as plain text if Telegram rejects the
// HTML.
func (a *Adapter) send(ctx context.Context, chat string, thread, replyTo int, md string) error {
	_, err := a.sendID(ctx, chat, thread, replyTo, md)
	return err
}

// sendID is send returning the new message's id.
func (a *Adapter) sendID(ctx context.Context, chat string, thread, replyTo int, md string) (int, error) {
	p := &tgbot.SendMessageParams{
		ChatID: chat, MessageThreadID: thread, Text: markup.TelegramHTML(md), ParseMode: models.ParseModeHTML,
	}
	if replyTo != 0 {
		p.ReplyParameters = &models.ReplyParameters{MessageID: replyTo, AllowSendingWithoutReply: true}
	}
	m, err := a.bot.SendMessage(ctx, p)
	if err == nil {
		return m.ID, nil
	}
	if !errors.Is(err, tgbot.ErrorBadRequest) {
		return 0, err
	}
	// 400 is how Telegram says "can't parse entities"; whatever the cause,
	// plain text is the fallback, and a second 400 is final.
	a.log.Info("telegram rejected HTML, sending plain text", "chat", chat, "err", err)
	p.Text, p.ParseMode = plain(md), ""
	m, err = a.bot.SendMessage(ctx, p)
	if err != nil {
		return 0, err
	}
	return m.ID, nil
}

func plain(md string) string {
	if s := markup.Plain(md); strings.TrimSpace(s) != "" {
		return s
	}
	return md
}

// streamer lets [editstream] post and edit Telegram messages. Partial
// texts are rendered like the final one, so that an unchanged final text
// needs no edit (Telegram refuses an edit that changes nothing).
type streamer struct{ a *Adapter }

func (s streamer) Post(ctx context.Context, msg *nanofleetv1.OutboundMessage, md string) (string, error) {
	replyTo := 0
	if channelconfig.On(s.a.cfg.ReplyToMessage, true) {
		replyTo = atoi(msg.GetMetadata()["message_id"])
	}
	id, err := s.a.sendID(ctx, msg.GetChatId(), atoi(msg.GetMetadata()["thread_id"]), replyTo, md)
	return strconv.Itoa(id), limited(err)
}

// limited marks Telegram's 429 as a wait for the stream, not a failure.
func limited(err error) error {
	var tooMany *tgbot.TooManyRequestsError
	if errors.As(err, &tooMany) {
		return &editstream.RetryAfter{After: time.Duration(tooMany.RetryAfter) * time.Second, Err: err}
	}
	return err
}

func (s streamer) Delete(ctx context.Context, msg *nanofleetv1.OutboundMessage, id string) error {
	_, err := s.a.bot.DeleteMessage(ctx, &tgbot.DeleteMessageParams{ChatID: msg.GetChatId(), MessageID: atoi(id)})
	return err
}

func (s streamer) Edit(ctx context.Context, msg *nanofleetv1.OutboundMessage, id, md string, _ bool) error {
	p := &tgbot.EditMessageTextParams{
		ChatID: msg.GetChatId(), MessageID: atoi(id), Text: markup.TelegramHTML(md), ParseMode: models.ParseModeHTML,
	}
	_, err := s.a.bot.EditMessageText(ctx, p)
	if err == nil || !errors.Is(err, tgbot.ErrorBadRequest) {
		return limited(err)
	}
	p.Text, p.ParseMode = plain(md), ""
	_, err = s.a.bot.EditMessageText(ctx, p)
	return limited(err)
}

// sendMedia uploads an attachment from the object store.
func (a *Adapter) sendMedia(ctx context.Context, chat string, thread int, m *nanofleetv1.MediaRef) error {
	if m.GetObject() == "" {
		if m.GetUrl() == "" {
			return nil
		}
		_, err := a.bot.SendDocument(ctx, &tgbot.SendDocumentParams{ChatID: chat, MessageThreadID: thread, Document: &models.InputFileString{Data: m.GetUrl()}})
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
	upload := &models.InputFileUpload{Filename: name, Data: strings.NewReader(string(data))}
	if strings.HasPrefix(m.GetMimeType(), "image/") {
		_, err = a.bot.SendPhoto(ctx, &tgbot.SendPhotoParams{ChatID: chat, MessageThreadID: thread, Photo: upload})
		return err
	}
	_, err = a.bot.SendDocument(ctx, &tgbot.SendDocumentParams{ChatID: chat, MessageThreadID: thread, Document: upload})
	return err
}

// classify turns a Bot API error into a delivery error.
func classify(err error) error {
	var tooMany *tgbot.TooManyRequestsError
	var migrate *tgbot.MigrateError
	switch {
	case errors.As(err, &tooMany):
		return gateway.Retry(err, time.Duration(tooMany.RetryAfter)*time.Second)
	case errors.As(err, &migrate),
		errors.Is(err, tgbot.ErrorBadRequest),
		errors.Is(err, tgbot.ErrorForbidden),
		errors.Is(err, tgbot.ErrorUnauthorized),
		errors.Is(err, tgbot.ErrorNotFound):
		return gateway.Permanent(err)
	}
	return gateway.Retry(err, 0)
}

func isRetry(err error) bool {
	var de *gateway.DeliveryError
	return errors.As(err, &de) && de.Retryable
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
