package dingtalk

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/editstream"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
)

// Channel is the channel name in subjects and session keys.
const Channel = "dingtalk"

// Limit is the longest piece of an answer, in UTF-16 code units, well
// inside a robot markdown message's limit.
const Limit = 4000

// Deps are what the adapter needs from its surroundings.
type Deps = adapterdeps.Deps

// Adapter is the DingTalk channel. It implements [gateway.LiveAdapter].
type Adapter struct {
	cfg   Config
	deps  Deps
	log   *slog.Logger
	api   string
	http  *http.Client
	media *media.Store
	// policy admits senders; its DM policy applies to direct messages
	// only (see access.Gate.Check), so groups and DMs share it.
	policy access.Policy
	// sent counts the pieces of each reply sent, fleet-wide: DingTalk has
	// no idempotency key to drop a piece sent twice.
	sent *parts.Store
	// streams is nil unless streaming into AI cards.
	streams *editstream.Streams
	// streamClock paces the streams; nil: the system's.
	streamClock editstream.Clock
	now         func() time.Time

	mu      sync.Mutex
	token   string
	expires time.Time
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
		api:    cfg.apiURL(),
		http:   &http.Client{Timeout: time.Minute},
		policy: cfg.Policy(Channel),
		now:    time.Now,
	}
	for _, o := range opts {
		if err := o(a); err != nil {
			return nil, err
		}
	}
	var err error
	if a.media, err = media.Open(ctx, deps.Bus, cfg.MediaLimit(DefaultMaxMediaBytes)); err != nil {
		return nil, fmt.Errorf("dingtalk: %w", err)
	}
	if a.sent, err = parts.Open(ctx, deps.Bus, parts.WithLogger(a.log)); err != nil {
		return nil, fmt.Errorf("dingtalk: %w", err)
	}
	switch {
	case cfg.Streaming && cfg.CardTemplateID != "":
		a.streams, err = editstream.New(ctx, editstream.Config{Channel: Channel, Interval: cfg.EditInterval(time.Second), Limit: Limit}, deps.Bus, cards{a}, editstream.WithLogger(a.log), editstream.WithClock(a.streamClock))
		if err != nil {
			return nil, fmt.Errorf("dingtalk: %w", err)
		}
	case cfg.Streaming:
		a.log.Warn("dingtalk: streaming needs channels.dingtalk.cardTemplateId (an AI card template); answers are sent whole")
	}
	return a, nil
}

// Channel returns "dingtalk".
func (a *Adapter) Channel() string { return Channel }
