package whatsapp

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp/kvstore"
)

// Channel is the channel name in subjects and session keys.
const Channel = "whatsapp"

// Limit is the longest piece of an answer in UTF-16 code units. WhatsApp
// has no documented limit (about 65,000 characters are accepted); 4000,
// as nanobot uses, keeps a piece readable on a phone.
const Limit = 4000

// Bucket is the short name of the KV bucket holding linked devices.
const Bucket = "whatsapp"

// Assets declares the bucket of linked devices for [bus.Provision].
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.KeyValue(jetstream.KeyValueConfig{
		Bucket: Bucket, Description: "linked WhatsApp devices (keys and Signal sessions)", History: 1,
		// Deleted keys' markers expire (kvstore.WithMarkerTTL): every
		// message leaves a decrypted-event key, deleted after 14 days.
		LimitMarkerTTL: time.Minute,
	})(sp, l)
}

// Deps are what the adapter needs from the gateway.
type Deps = adapterdeps.Deps

// Adapter is the WhatsApp channel. It implements [gateway.LiveAdapter].
type Adapter struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	dial    Dialer
	devices *kvstore.Container
	media   *media.Store
	// policy admits senders; its DM policy applies to direct messages
	// only (see access.Gate.Check), so groups and DMs share it.
	policy access.Policy
	sent   *parts.Store
	// route is the core NATS subject on which the gateway holding the
	// connection sends for the others.
	route string

	mu   sync.Mutex
	conn Conn
	self []string // the account's own user ids (phone number, LID)
}

// Option changes an optional setting of [New].
type Option func(*Adapter) error

// WithLogger sets the adapter's logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(a *Adapter) error { a.log = observe.OrDiscard(l).With("channel", Channel); return nil }
}

// WithDialer replaces whatsmeow as the way to connect to WhatsApp (tests
// pass a fake).
func WithDialer(d Dialer) Option { return func(a *Adapter) error { a.dial = d; return nil } }

// New returns the adapter for cfg, which must be valid and enabled.
func New(ctx context.Context, cfg Config, deps Deps, opts ...Option) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Adapter{
		cfg: cfg, deps: deps, log: slog.New(slog.DiscardHandler),
		policy: cfg.Policy(Channel),
		route:  deps.Bus.Space.WhatsAppSend(cfg.account()),
	}
	for _, o := range opts {
		if err := o(a); err != nil {
			return nil, err
		}
	}
	kv, err := deps.Bus.KV(ctx, Bucket)
	if err != nil {
		return nil, fmt.Errorf("whatsapp: %w", err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("whatsapp: bucket status: %w", err)
	}
	if a.devices, err = kvstore.New(kv, cfg.account(), logger{a.log.With("component", "whatsmeow-store")}, kvstore.WithMarkerTTL(st.LimitMarkerTTL())); err != nil {
		return nil, err
	}
	if a.media, err = media.Open(ctx, deps.Bus, cfg.MediaLimit(DefaultMaxMediaBytes)); err != nil {
		return nil, fmt.Errorf("whatsapp: %w", err)
	}
	if a.dial == nil {
		a.dial = whatsmeowDialer(a.log.With("component", "whatsmeow"), a.media.Limit())
	}
	if a.sent, err = parts.Open(ctx, deps.Bus, parts.WithLogger(a.log)); err != nil {
		return nil, fmt.Errorf("whatsapp: %w", err)
	}
	return a, nil
}

// Channel returns "whatsapp".
func (a *Adapter) Channel() string { return Channel }

func (a *Adapter) current() Conn {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conn
}
