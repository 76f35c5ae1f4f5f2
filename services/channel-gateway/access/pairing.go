package access

// Pairing: a sender the policy does not know gets a code on a direct
// message, and is admitted once the operator approves it.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

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
	if _, err := bus.Get(ctx, g.codes, pendingKey); err == nil {
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
	e, err := bus.Get(ctx, codes, codeKey(code))
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
	if _, err := bus.PublishMsg(ctx, b.JS, msg); err != nil {
		return fmt.Errorf("access: send message to %s:%s: %w", channel, chatID, err)
	}
	return nil
}
