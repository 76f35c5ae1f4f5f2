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

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/slashcmd"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
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

// maxText is the longest text Telegram takes: 4,096 UTF-16 units after
// entity parsing (https://core.telegram.org/bots/api#sendmessage).
const maxText = 4096

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
	forged  *observe.Throttled  // webhook requests without the secret

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
		if err := typing.CheckTiming(every, most); err != nil {
			return fmt.Errorf("telegram: %w", err)
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
		policy:      cfg.Policy(Channel),
	}
	if a.apiBase == "" {
		a.apiBase = DefaultAPIBase
	}
	for _, o := range opts {
		if err := o(a); err != nil {
			return nil, err
		}
	}
	a.forged = observe.NewThrottled(a.log, observe.ThrottleEvery)
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
		a.streams, err = editstream.New(ctx, editstream.Config{Channel: Channel, Interval: cfg.EditInterval(time.Second), Limit: markup.TelegramLimit, Size: shown, Most: maxText}, deps.Bus, streamer{a}, editstream.WithLogger(a.log))
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
	go a.setMenu(ctx)
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
	}, retry.WithStatus(a.deps.Status, Channel))
}

// setMenu registers the fleet's slash commands as the bot's command menu,
// as nanobot does, with '_' for '-' (Telegram's command names allow no
// '-'; the worker takes either). A failure leaves the menu as it was: the
// commands work typed.
func (a *Adapter) setMenu(ctx context.Context) {
	var cmds []models.BotCommand
	for _, e := range slashcmd.Menu() {
		name := strings.ReplaceAll(strings.TrimPrefix(e.Name, "/"), "-", "_")
		cmds = append(cmds, models.BotCommand{Command: name, Description: e.Help})
	}
	ctx, cancel := context.WithTimeout(ctx, bus.CallTimeout)
	defer cancel()
	if _, err := a.bot.SetMyCommands(ctx, &tgbot.SetMyCommandsParams{Commands: cmds}); err != nil && ctx.Err() == nil {
		a.log.Warn("telegram: command menu not set", "err", err)
	}
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

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
