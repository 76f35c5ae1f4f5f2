package access

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
)

// DMPolicy says what happens to direct messages from senders not on the
// allow list.
type DMPolicy string

// DM policies.
const (
	// DMPairing answers an unknown sender with a pairing code (default).
	DMPairing DMPolicy = "pairing"
	// DMAllowlist drops messages from unknown senders.
	DMAllowlist DMPolicy = "allowlist"
	// DMOpen admits everyone in direct messages.
	DMOpen DMPolicy = "open"
	// DMDisabled ignores direct messages, also from allowed senders.
	DMDisabled DMPolicy = "disabled"
)

// Valid reports whether p is a known policy; empty means the default.
func (p DMPolicy) Valid() bool {
	switch p {
	case "", DMPairing, DMAllowlist, DMOpen, DMDisabled:
		return true
	}
	return false
}

// Policy is one channel's access rules.
type Policy struct {
	// Channel name, e.g. "telegram".
	Channel string
	// AllowFrom lists sender ids or user names (with or without "@");
	// "*" admits everyone. Empty admits nobody but approved senders.
	AllowFrom []string
	// DM is the direct-message policy; empty means [DMPairing].
	DM DMPolicy
}

// Sender is who wrote a platform message, and where.
type Sender struct {
	// ID is the platform's user id.
	ID string
	// Aliases are other names allowFrom may use, e.g. the user name;
	// empty ones (a platform field not set) match nothing.
	Aliases []string
	// Name is a display name, for the operator's eyes.
	Name string
	// ChatID is the chat the message came from.
	ChatID string
	// DM is true for a one-to-one chat with the bot.
	DM bool
}

// Verdict is the outcome of [Gate.Check].
type Verdict int

// Verdicts.
const (
	// Allow: publish the message.
	Allow Verdict = iota
	// Deny: drop it silently.
	Deny
	// PairingSent: the sender was sent (or already has) a pairing code;
	// drop the message.
	PairingSent
	// Handled: the message was a /pairing command and has been answered;
	// drop it.
	Handled
)

func (v Verdict) String() string {
	return [...]string{"allow", "deny", "pairing", "handled"}[v]
}

// DefaultCodeTTL is how long a pairing code stays valid.
const DefaultCodeTTL = time.Hour

// Gate applies policies. It is safe for concurrent use.
type Gate struct {
	b        *bus.Bus
	codes    jetstream.KeyValue
	approved jetstream.KeyValue
	log      *slog.Logger
	ttl      time.Duration
}

// Option configures a [Gate].
type Option func(*Gate) error

// WithLogger sets the gate's logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(g *Gate) error { g.log = observe.OrDiscard(l); return nil }
}

// WithCodeTTL sets how long pairing codes live (at least a second).
func WithCodeTTL(d time.Duration) Option {
	return func(g *Gate) error {
		if d < time.Second {
			return fmt.Errorf("access: code TTL %s is below 1s", d)
		}
		g.ttl = d
		return nil
	}
}

// Short names of the access buckets.
const (
	bucketPairing = "pairing"
	bucketAccess  = "access"
)

// Assets declares the buckets of pairing codes and approved senders for
// [bus.Provision]. A code lives for the gate's code TTL by a per-key TTL,
// so the bucket does not depend on [WithCodeTTL].
func Assets(sp subject.Space, _ bus.Layout) bus.Assets {
	return bus.Assets{Buckets: []jetstream.KeyValueConfig{
		{
			Bucket:      sp.Bucket(bucketPairing),
			Description: "DM pairing codes waiting for approval",
			History:     1,
			// Allows per-key TTLs; the marker an expired code leaves
			// lives this long.
			LimitMarkerTTL: time.Minute,
		},
		{
			Bucket:      sp.Bucket(bucketAccess),
			Description: "senders approved by pairing, per channel",
			History:     1,
		},
	}}
}

// Open returns a gate keeping its state in b's JetStream; [Assets] must
// have been provisioned.
func Open(ctx context.Context, b *bus.Bus, opts ...Option) (*Gate, error) {
	g := &Gate{b: b, log: slog.New(slog.DiscardHandler), ttl: DefaultCodeTTL}
	for _, o := range opts {
		if err := o(g); err != nil {
			return nil, err
		}
	}
	var err error
	if g.codes, err = b.KV(ctx, bucketPairing); err != nil {
		return nil, fmt.Errorf("access: %w", err)
	}
	if g.approved, err = b.KV(ctx, bucketAccess); err != nil {
		return nil, fmt.Errorf("access: %w", err)
	}
	return g, nil
}

// request is what a pairing code stands for.
type request struct {
	Channel  string    `json:"channel"`
	SenderID string    `json:"senderId"`
	Name     string    `json:"name,omitempty"`
	ChatID   string    `json:"chatId"`
	Created  time.Time `json:"created"`
}

// Check decides about one message from s with text on p's channel.
func (g *Gate) Check(ctx context.Context, p Policy, s Sender, text string) (Verdict, error) {
	if s.DM && p.DM == DMDisabled {
		return Deny, nil
	}
	allowed, err := g.Allowed(ctx, p, s)
	if err != nil {
		return Deny, err
	}
	if allowed {
		if code, ok := pairingCommand(text); ok {
			return Handled, g.approveCommand(ctx, p, s, code)
		}
		return Allow, nil
	}
	if !s.DM {
		return Deny, nil
	}
	switch p.DM {
	case DMOpen:
		return Allow, nil
	case "", DMPairing:
		return PairingSent, g.pair(ctx, p, s)
	}
	return Deny, nil
}

// Admit is [Gate.Check] as an adapter uses it on a message it received:
// it reports whether the message goes on to the agent, and logs one that
// does not at debug level with its chat, sender and verdict, alike on
// every platform. err is Check's, for the caller to wrap or log.
func (g *Gate) Admit(ctx context.Context, log *slog.Logger, p Policy, s Sender, text string) (bool, error) {
	verdict, err := g.Check(ctx, p, s, text)
	if err != nil {
		return false, err
	}
	if verdict != Allow {
		log.Debug("message not admitted", "chat", s.ChatID, "sender", s.ID, "verdict", verdict)
		return false, nil
	}
	return true, nil
}

// Allowed reports whether s is on p's allow list or was approved.
func (g *Gate) Allowed(ctx context.Context, p Policy, s Sender) (bool, error) {
	if listed(p.AllowFrom, s) {
		return true, nil
	}
	_, err := bus.Get(ctx, g.approved, approvedKey(p.Channel, s.ID))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	}
	return false, fmt.Errorf("access: read approval of %s: %w", s.ID, err)
}

func listed(allow []string, s Sender) bool {
	names := append([]string{s.ID}, s.Aliases...)
	for _, a := range allow {
		a = strings.TrimSpace(a)
		if a == "*" {
			return true
		}
		// An empty entry (an unset variable) or name (a field the platform
		// left unset) names nobody.
		if a = strings.TrimPrefix(a, "@"); a == "" {
			continue
		}
		for _, n := range names {
			if strings.EqualFold(a, strings.TrimPrefix(n, "@")) {
				return true
			}
		}
	}
	return false
}
