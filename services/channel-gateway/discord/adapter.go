package discord

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/disgoorg/disgo/rest"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/editstream"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/typing"
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
		if err := typing.CheckTiming(every, most); err != nil {
			return fmt.Errorf("discord: %w", err)
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
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.KeyValue(jetstream.KeyValueConfig{
		Bucket:      bucketSessions,
		Description: "Discord gateway sessions, resumed by the gateway that takes the connection over",
		History:     1,
	})(sp, l)
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
		policy: cfg.Policy(Channel),
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
