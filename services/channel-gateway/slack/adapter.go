package slack

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/editstream"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// Channel is the channel name in subjects and session keys.
const Channel = "slack"

// maxText is the longest message text Slack takes: 40,000 characters
// (https://api.slack.com/methods/chat.postMessage), counted here in UTF-16
// units, never fewer.
const maxText = 40000

// Deps are what the adapter needs from its surroundings.
type Deps = adapterdeps.Deps

// Adapter is the Slack channel. It implements [gateway.LiveAdapter].
type Adapter struct {
	cfg       Config
	deps      Deps
	log       *slog.Logger
	api       *slack.Client
	http      *http.Client
	apiURL    *url.URL // the Web API's: files are fetched from its host only
	media     *media.Store
	groups    access.Policy
	dms       access.Policy
	pingEvery time.Duration

	sent    *parts.Store
	streams *editstream.Streams // nil unless streaming

	mu      sync.Mutex
	botID   string // the bot's user id, from auth.test
	botName string // "@name", for the status board
}

// Option tunes an adapter, mostly for tests.
type Option func(*Adapter) error

// WithLogger sets the adapter's logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(a *Adapter) error { a.log = observe.OrDiscard(l).With("channel", Channel); return nil }
}

// WithPingInterval sets how long Socket Mode may go without a ping from
// Slack before reconnecting (default 30s).
func WithPingInterval(d time.Duration) Option {
	return func(a *Adapter) error {
		if d < time.Second {
			return fmt.Errorf("slack: ping interval %s is below 1s", d)
		}
		a.pingEvery = d
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
		http:      &http.Client{Timeout: 2 * time.Minute},
		pingEvery: 30 * time.Second,
		groups:    access.Policy{Channel: Channel, AllowFrom: cfg.AllowFrom, DM: access.DMAllowlist},
		dms: access.Policy{
			Channel:   Channel,
			AllowFrom: append(append([]string(nil), cfg.AllowFrom...), cfg.DM.AllowFrom...),
			DM:        cfg.DM.Policy,
		},
	}
	if !channelconfig.On(cfg.DM.Enabled, true) {
		a.dms.DM = access.DMDisabled
	}
	for _, o := range opts {
		if err := o(a); err != nil {
			return nil, err
		}
	}
	var err error
	apiURL := cfg.APIURL
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/"
	}
	if a.apiURL, err = url.Parse(apiURL); err != nil {
		return nil, fmt.Errorf("slack: api URL: %w", err)
	}
	a.api = slack.New(cfg.BotToken,
		slack.OptionAppLevelToken(cfg.AppToken),
		slack.OptionAPIURL(apiURL),
		slack.OptionHTTPClient(a.http),
		slack.OptionLog(logAdapter{a.log}),
	)
	if a.media, err = media.Open(ctx, deps.Bus, cfg.MediaLimit(DefaultMaxMediaBytes)); err != nil {
		return nil, fmt.Errorf("slack: %w", err)
	}
	if a.sent, err = parts.Open(ctx, deps.Bus, parts.WithLogger(a.log)); err != nil {
		return nil, fmt.Errorf("slack: %w", err)
	}
	if cfg.Streaming {
		a.streams, err = editstream.New(ctx, editstream.Config{Channel: Channel, Interval: cfg.EditInterval(1200 * time.Millisecond), Limit: markup.SlackLimit, Size: shown, Most: maxText}, deps.Bus, streamer{a}, editstream.WithLogger(a.log))
		if err != nil {
			return nil, fmt.Errorf("slack: %w", err)
		}
	}
	return a, nil
}

// Channel returns "slack".
func (a *Adapter) Channel() string { return Channel }

func (a *Adapter) bot() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botID
}

// logAdapter sends slack-go's log lines to slog at debug level.
type logAdapter struct{ log *slog.Logger }

func (l logAdapter) Output(_ int, s string) error {
	l.log.Debug(strings.TrimSpace(s), "source", "slack-go")
	return nil
}
