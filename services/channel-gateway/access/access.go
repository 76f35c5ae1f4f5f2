package access

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
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
	_, err := g.approved.Get(ctx, approvedKey(p.Channel, s.ID))
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

// pairingCommand recognises "/pairing approve CODE".
func pairingCommand(text string) (string, bool) {
	f := strings.Fields(text)
	if len(f) != 3 || !strings.EqualFold(f[1], "approve") {
		return "", false
	}
	cmd, _, _ := strings.Cut(f[0], "@") // Telegram: /pairing@my_bot
	if !strings.EqualFold(cmd, "/pairing") {
		return "", false
	}
	return f[2], true
}

func (g *Gate) approveCommand(ctx context.Context, p Policy, s Sender, code string) error {
	reply := "Approved pairing code " + strings.ToUpper(code) + "."
	err := Approve(ctx, g.b, code)
	switch {
	case errors.Is(err, ErrUnknownCode):
		reply = "Pairing code " + strings.ToUpper(code) + " is unknown or expired."
	case err != nil:
		return err
	}
	g.log.Info("pairing command", "channel", p.Channel, "by", s.ID, "code", strings.ToUpper(code), "ok", err == nil)
	id := fmt.Sprintf("pairing-cmd:%s:%s:%d", s.ID, strings.ToUpper(code), time.Now().UnixNano())
	return notify(ctx, g.b, p.Channel, s.ChatID, id, reply)
}

// pair gives s a pairing code, once per code lifetime.
func (g *Gate) pair(ctx context.Context, p Policy, s Sender) error {
	pendingKey := "pending." + subject.Token(p.Channel) + "." + subject.Token(s.ID)
	if _, err := g.codes.Get(ctx, pendingKey); err == nil {
		return nil // already has a live code
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("access: read pending pairing: %w", err)
	}
	code, err := g.newCode(ctx, request{Channel: p.Channel, SenderID: s.ID, Name: s.Name, ChatID: s.ChatID, Created: time.Now().UTC()})
	if err != nil {
		return err
	}
	if _, err := g.codes.Create(ctx, pendingKey, []byte(code), jetstream.KeyTTL(g.ttl)); err != nil {
		_ = g.codes.Delete(ctx, codeKey(code))
		if errors.Is(err, jetstream.ErrKeyExists) {
			return nil // another gateway paired the same sender just now
		}
		return fmt.Errorf("access: store pending pairing: %w", err)
	}
	g.log.Info("pairing code issued", "channel", p.Channel, "sender", s.ID, "name", s.Name, "code", code,
		"approve", "nanofleet pairing approve "+code)
	text := fmt.Sprintf("I don't know you yet. Ask my owner to approve this pairing code:\n\n%s\n\n"+
		"(nanofleet pairing approve %s — it expires in %s.)", code, code, human(g.ttl))
	return notify(ctx, g.b, p.Channel, s.ChatID, "pairing:"+code, text)
}

// codeAlphabet leaves out characters that are easy to confuse.
const codeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

func (g *Gate) newCode(ctx context.Context, req request) (string, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("access: encode pairing: %w", err)
	}
	for range 5 {
		var raw [8]byte
		_, _ = rand.Read(raw[:]) // never fails
		for i, c := range raw {
			raw[i] = codeAlphabet[int(c)%len(codeAlphabet)] // 256 % 32 == 0: uniform
		}
		code := string(raw[:])
		_, err := g.codes.Create(ctx, codeKey(code), data, jetstream.KeyTTL(g.ttl))
		if err == nil {
			return code, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return "", fmt.Errorf("access: store pairing code: %w", err)
		}
	}
	return "", errors.New("access: could not find a free pairing code")
}

// human formats a code lifetime for people.
func human(d time.Duration) string {
	if d >= 2*time.Minute {
		return fmt.Sprintf("%d minutes", int(d.Minutes()))
	}
	return fmt.Sprintf("%d seconds", int(d.Seconds()))
}

func codeKey(code string) string { return "code." + code }

func approvedKey(channel, sender string) string {
	return subject.Token(channel) + "." + subject.Token(sender)
}

// Approve admits the sender who was given code, and tells them. It is what
// `nanofleet pairing approve CODE` calls; it returns [ErrUnknownCode] for a
// code that does not exist or expired.
func Approve(ctx context.Context, b *bus.Bus, code string) error {
	code = strings.ToUpper(strings.TrimSpace(code))
	if code == "" || strings.ContainsAny(code, ".*> ") {
		return ErrUnknownCode
	}
	// Opened, never created: the CLI calls this too, and a client does
	// not change the fleet's layout. No bucket means no gateway ever
	// issued a code.
	codes, err := b.JS.KeyValue(ctx, b.Space.Bucket(bucketPairing))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return ErrUnknownCode
	}
	if err != nil {
		return fmt.Errorf("access: open pairing bucket: %w", err)
	}
	approved, err := b.KV(ctx, bucketAccess)
	if err != nil {
		return fmt.Errorf("access: %w", err)
	}
	e, err := codes.Get(ctx, codeKey(code))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ErrUnknownCode
	}
	if err != nil {
		return fmt.Errorf("access: read pairing code: %w", err)
	}
	var req request
	if err := json.Unmarshal(e.Value(), &req); err != nil {
		return fmt.Errorf("access: decode pairing code %s: %w", code, err)
	}
	rec, _ := json.Marshal(map[string]any{"approvedAt": time.Now().UTC(), "code": code, "name": req.Name, "chatId": req.ChatID})
	if _, err := approved.Put(ctx, approvedKey(req.Channel, req.SenderID), rec); err != nil {
		return fmt.Errorf("access: store approval: %w", err)
	}
	_ = codes.Delete(ctx, codeKey(code))
	_ = codes.Delete(ctx, "pending."+subject.Token(req.Channel)+"."+subject.Token(req.SenderID))
	return notify(ctx, b, req.Channel, req.ChatID, "pairing-approved:"+code, "You're approved. Go ahead, I'm listening.")
}

// notify publishes a durable message to a chat for the gateway to deliver.
func notify(ctx context.Context, b *bus.Bus, channel, chatID, id, text string) error {
	out := &nanofleetv1.OutboundMessage{
		Id: id, Channel: channel, ChatId: chatID, Content: text,
		Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE, CreatedAt: timestamppb.Now(),
	}
	data, err := proto.Marshal(out)
	if err != nil {
		return fmt.Errorf("access: encode message: %w", err)
	}
	msg := nats.NewMsg(b.Space.Outbound(channel, chatID))
	msg.Data = data
	msg.Header.Set(nats.MsgIdHdr, id)
	if _, err := b.JS.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("access: send message to %s:%s: %w", channel, chatID, err)
	}
	return nil
}
