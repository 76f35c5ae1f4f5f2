package feishu

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/httplimit"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/editstream"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/hold"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/retry"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/webhook"
)

// Channel is the channel name in subjects and session keys.
const Channel = "feishu"

// Limit is the longest piece of an answer, in UTF-16 code units: a card
// or post request may be 30 KB, and a CJK character takes three bytes.
const Limit = 8000

// Deps are what the adapter needs from its surroundings.
type Deps = adapterdeps.Deps

// Adapter is the Feishu / Lark channel. It implements
// [gateway.LiveAdapter].
type Adapter struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	base string
	http *http.Client
	// lark is the SDK configuration (base URL, credentials, token cache)
	// and im its messaging API; the SDK's lark.Client would link every
	// one of its hundred services into the binary.
	lark  *larkcore.Config
	im    *larkim.V1
	media *media.Store
	// policy admits senders; its DM policy applies to direct messages
	// only (see access.Gate.Check), so groups and DMs share it.
	policy access.Policy
	sent   *parts.Store
	// streams is nil unless streaming.
	streams *editstream.Streams
	// streamClock paces the streams; nil: the system's.
	streamClock editstream.Clock
	// size measures a piece of an answer against maxBody(FormatCard) (see
	// measure).
	size func(md string) int
	// nonces is nil unless in webhook mode.
	nonces jetstream.KeyValue

	hook webhook.Receiver // Run's inbox, for the webhook handler
	// refused logs refused webhook requests, which anyone can send, at
	// most one line per interval.
	refused *observe.Throttled

	mu    sync.Mutex
	botID string // the bot's open id, for mentions
}

// Option changes an optional setting of [New].
type Option func(*Adapter) error

// WithLogger sets the adapter's logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(a *Adapter) error { a.log = observe.OrDiscard(l).With("channel", Channel); return nil }
}

// WithStreamClock sets the clock that paces a streamed answer's
// updates (see [Config] streamEditInterval); the default is the system's.
func WithStreamClock(c editstream.Clock) Option {
	return func(a *Adapter) error { a.streamClock = c; return nil }
}

// New returns the adapter for cfg, which must be valid and enabled.
func New(ctx context.Context, cfg Config, deps Deps, opts ...Option) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Adapter{
		cfg: cfg, deps: deps, log: slog.New(slog.DiscardHandler),
		base: cfg.baseURL(),
		// The SDK reads a download whole before the media store's limit
		// applies, and the sender chose its size: bound every body at the
		// limit (API answers are far below a megabyte).
		http: &http.Client{Timeout: 2 * time.Minute, Transport: httplimit.Transport(
			http.DefaultTransport.(*http.Transport).Clone(), max(cfg.MediaLimit(DefaultMaxMediaBytes), 1<<20), media.ErrTooLarge)},
		policy: cfg.Policy(Channel),
	}
	for _, o := range opts {
		if err := o(a); err != nil {
			return nil, err
		}
	}
	a.refused = observe.NewThrottled(a.log, observe.ThrottleEvery)
	a.lark = larkConfig(cfg, a.base, a.http, logAdapter{a.log})
	a.im = larkim.New(a.lark)
	var err error
	if a.media, err = media.Open(ctx, deps.Bus, cfg.MediaLimit(DefaultMaxMediaBytes)); err != nil {
		return nil, fmt.Errorf("feishu: %w", err)
	}
	if cfg.Mode == ModeWebhook {
		if a.nonces, err = deps.Bus.KV(ctx, bucketNonces); err != nil {
			return nil, fmt.Errorf("feishu: %w", err)
		}
	}
	if a.sent, err = parts.Open(ctx, deps.Bus, parts.WithLogger(a.log)); err != nil {
		return nil, fmt.Errorf("feishu: %w", err)
	}
	a.size = measure(cfg.ReplyFormat, cfg.Streaming)
	if cfg.Streaming {
		a.streams, err = editstream.New(ctx, editstream.Config{Channel: Channel, Interval: cfg.EditInterval(time.Second), Limit: Limit, Size: a.size, Most: maxBody(FormatCard)}, deps.Bus, streamer{a}, editstream.WithLogger(a.log), editstream.WithClock(a.streamClock))
		if err != nil {
			return nil, fmt.Errorf("feishu: %w", err)
		}
	}
	return a, nil
}

// Channel returns "feishu".
func (a *Adapter) Channel() string { return Channel }

// Webhook returns the path to serve [Adapter.WebhookHandler] on, in
// webhook mode.
func (a *Adapter) Webhook() (path string, ok bool) {
	if a.cfg.Mode != ModeWebhook {
		return "", false
	}
	return a.cfg.WebhookPath(), true
}

// Run receives events until ctx ends: in webhook mode through
// [Adapter.WebhookHandler], else over a long connection held while this
// gateway holds the fleet's lease for the app.
func (a *Adapter) Run(ctx context.Context, in gateway.Inbox) error {
	account, err := a.identify(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	stopStreams, err := a.streams.Watch(ctx)
	if err != nil {
		return err
	}
	defer stopStreams()
	a.hook.Serve(ctx, in)
	if a.cfg.Mode == ModeWebhook {
		a.log.Info("feishu events by webhook", "path", a.cfg.WebhookPath())
		a.deps.Status.Serving(ctx, a.log, Channel, account)
		<-ctx.Done()
		return nil
	}
	return hold.Run(ctx, a.deps.Bus, hold.Key(Channel, a.base+"/"+a.cfg.AppID), a.log, func(ctx context.Context) error {
		return a.connect(ctx, in)
	}, hold.WithAccount(account), hold.WithStatus(a.deps.Status))
}

// identify asks for the bot's open id (for mentions), retrying until the
// platform answers or ctx ends; rejected credentials are fatal. It returns
// the account to show on the status board: the app's name as Feishu shows
// it, or the open id when the app has none.
func (a *Adapter) identify(ctx context.Context) (account string, err error) {
	err = retry.Until(ctx, a.log, "feishu bot info failed, retrying", func(ctx context.Context) error {
		resp, err := larkcore.Request(ctx, &larkcore.ApiReq{
			HttpMethod: http.MethodGet, ApiPath: "/open-apis/bot/v3/info",
			SupportedAccessTokenTypes: []larkcore.AccessTokenType{larkcore.AccessTokenTypeTenant},
		}, a.lark)
		var ce larkcore.CodeError // the token endpoint's refusal
		if errors.As(err, &ce) && badCredentials[ce.Code] {
			return retry.Final(fmt.Errorf("feishu: app credentials rejected: %w", err))
		}
		if err != nil {
			return err
		}
		var info struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
			Bot  struct {
				OpenID  string `json:"open_id"`
				AppName string `json:"app_name"`
			} `json:"bot"`
		}
		if err := json.Unmarshal(resp.RawBody, &info); err != nil {
			return err
		}
		switch {
		case badCredentials[info.Code]:
			return retry.Final(fmt.Errorf("feishu: app credentials rejected: %d %s", info.Code, info.Msg))
		case info.Code != 0 || info.Bot.OpenID == "":
			return fmt.Errorf("bot info: %d %s", info.Code, info.Msg)
		}
		a.mu.Lock()
		a.botID = info.Bot.OpenID
		a.mu.Unlock()
		a.log.Info("feishu bot ready", "app", info.Bot.AppName, "open_id", info.Bot.OpenID)
		account = cmp.Or(info.Bot.AppName, info.Bot.OpenID)
		return nil
	}, retry.WithStatus(a.deps.Status, Channel))
	return account, err
}

// badCredentials are the token endpoint's answers to a wrong app id or
// secret.
var badCredentials = map[int]bool{10003: true, 10014: true}

func (a *Adapter) bot() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botID
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// logAdapter sends the SDK's log lines to slog at debug level; the
// adapter logs what matters itself.
type logAdapter struct{ log *slog.Logger }

func (l logAdapter) Debug(_ context.Context, args ...any) { l.out(args) }
func (l logAdapter) Info(_ context.Context, args ...any)  { l.out(args) }
func (l logAdapter) Warn(_ context.Context, args ...any)  { l.out(args) }
func (l logAdapter) Error(_ context.Context, args ...any) { l.out(args) }

func (l logAdapter) out(args []any) {
	l.log.Debug(strings.TrimSpace(fmt.Sprint(args...)), "source", "lark-sdk")
}

// larkConfig is what the SDK's lark.NewClient builds for a self-built app,
// with the adapter's base URL, HTTP client and logger.
func larkConfig(cfg Config, base string, client *http.Client, log larkcore.Logger) *larkcore.Config {
	c := &larkcore.Config{
		BaseUrl: base, AppId: cfg.AppID, AppSecret: cfg.AppSecret,
		EnableTokenCache: true, AppType: larkcore.AppTypeSelfBuilt,
		HttpClient: client, Logger: log, LogLevel: larkcore.LogLevelDebug,
		ReqTimeout: 30 * time.Second,
	}
	larkcore.NewLogger(c)
	larkcore.NewCache(c)
	larkcore.NewSerialization(c)
	larkcore.NewHttpClient(c)
	return c
}
