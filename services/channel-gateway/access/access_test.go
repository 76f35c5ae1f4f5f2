package access_test

import (
	"bytes"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
)

func open(t *testing.T, opts ...access.Option) (*access.Gate, *bus.Bus) {
	t.Helper()
	b := bustest.StartJetStream(t, access.Assets)
	g, err := access.Open(t.Context(), b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g, b
}

// sent returns the messages published to a chat so far.
func sent(t *testing.T, b *bus.Bus, channel, chat string) []*nanofleetv1.OutboundMessage {
	t.Helper()
	ctx := t.Context()
	c, err := b.JS.OrderedConsumer(ctx, b.Space.OutboundStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.Space.Outbound(channel, chat)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []*nanofleetv1.OutboundMessage
	batch, err := c.FetchNoWait(100)
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		o := &nanofleetv1.OutboundMessage{}
		if err := proto.Unmarshal(m.Data(), o); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

func TestAllowed(t *testing.T) {
	g, _ := open(t)
	alice := access.Sender{ID: "42", Aliases: []string{"Alice"}}
	// A platform that leaves a name unset passes it empty.
	unnamed := access.Sender{ID: "43", Aliases: []string{"", "@"}}
	tests := []struct {
		name   string
		allow  []string
		sender access.Sender
		want   bool
	}{
		{"empty admits nobody", nil, alice, false},
		{"star", []string{"*"}, alice, true},
		{"id", []string{"7", "42"}, alice, true},
		{"user name with at", []string{"@alice"}, alice, true},
		{"user name bare", []string{"ALICE"}, alice, true},
		{"other", []string{"bob", "43"}, alice, false},
		{"an empty alias matches no empty entry", []string{"", " ", "@"}, unnamed, false},
		{"an unnamed sender by id", []string{"43"}, unnamed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := g.Allowed(t.Context(), access.Policy{Channel: "telegram", AllowFrom: tt.allow}, tt.sender)
			if err != nil || got != tt.want {
				t.Errorf("Allowed = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestCheckVerdicts(t *testing.T) {
	g, b := open(t)
	ctx := t.Context()
	tests := []struct {
		name   string
		policy access.Policy
		sender access.Sender
		want   access.Verdict
		msgs   int // messages sent to the sender's chat
	}{
		{"allowed in group", access.Policy{AllowFrom: []string{"1"}}, access.Sender{ID: "1", ChatID: "g1"}, access.Allow, 0},
		{"stranger in group", access.Policy{AllowFrom: []string{"1"}}, access.Sender{ID: "2", ChatID: "g2"}, access.Deny, 0},
		{"stranger in DM, allowlist", access.Policy{DM: access.DMAllowlist}, access.Sender{ID: "3", ChatID: "d3", DM: true}, access.Deny, 0},
		{"stranger in DM, open", access.Policy{DM: access.DMOpen}, access.Sender{ID: "4", ChatID: "d4", DM: true}, access.Allow, 0},
		{"allowed in DM, disabled", access.Policy{AllowFrom: []string{"*"}, DM: access.DMDisabled}, access.Sender{ID: "5", ChatID: "d5", DM: true}, access.Deny, 0},
		{"stranger in DM, pairing", access.Policy{}, access.Sender{ID: "6", ChatID: "d6", DM: true}, access.PairingSent, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.policy.Channel = "telegram"
			got, err := g.Check(ctx, tt.policy, tt.sender, "hello")
			if err != nil || got != tt.want {
				t.Fatalf("Check = %v, %v; want %v", got, err, tt.want)
			}
			if n := len(sent(t, b, "telegram", tt.sender.ChatID)); n != tt.msgs {
				t.Errorf("%d messages sent to the chat, want %d", n, tt.msgs)
			}
		})
	}
}

// TestAdmit: only an Allow verdict lets a message on; any other is
// logged with the chat, sender and verdict.
func TestAdmit(t *testing.T) {
	g, _ := open(t)
	tests := []struct {
		name   string
		policy access.Policy
		sender access.Sender
		want   bool
		log    string // in the debug line; "" for none
	}{
		{"allowed", access.Policy{AllowFrom: []string{"1"}}, access.Sender{ID: "1", ChatID: "g1"}, true, ""},
		{"denied", access.Policy{AllowFrom: []string{"1"}}, access.Sender{ID: "2", ChatID: "g2"}, false, "chat=g2 sender=2 verdict=deny"},
		{"pairing", access.Policy{}, access.Sender{ID: "3", ChatID: "d3", DM: true}, false, "chat=d3 sender=3 verdict=pairing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			tt.policy.Channel = "telegram"
			got, err := g.Admit(t.Context(), log, tt.policy, tt.sender, "hello")
			if err != nil || got != tt.want {
				t.Fatalf("Admit = %v, %v; want %v", got, err, tt.want)
			}
			switch {
			case tt.log == "" && logs.Len() > 0:
				t.Errorf("logged %q for an admitted message", logs.String())
			case tt.log != "" && !strings.Contains(logs.String(), `msg="message not admitted" `+tt.log):
				t.Errorf("log = %q, want the line with %q", logs.String(), tt.log)
			}
		})
	}
}

var codeRE = regexp.MustCompile(`\b[A-HJ-NP-Z2-9]{8}\b`)

func TestPairingFlow(t *testing.T) {
	g, b := open(t)
	ctx := t.Context()
	p := access.Policy{Channel: "telegram", AllowFrom: []string{"owner"}}
	stranger := access.Sender{ID: "99", Name: "Stranger", ChatID: "99", DM: true}

	for range 3 { // asking again does not mint new codes
		if v, err := g.Check(ctx, p, stranger, "hi"); err != nil || v != access.PairingSent {
			t.Fatalf("Check = %v, %v", v, err)
		}
	}
	msgs := sent(t, b, "telegram", "99")
	if len(msgs) != 1 {
		t.Fatalf("stranger got %d messages, want one code", len(msgs))
	}
	code := codeRE.FindString(msgs[0].GetContent())
	if code == "" {
		t.Fatalf("no code in %q", msgs[0].GetContent())
	}

	if err := access.Approve(ctx, b, "NOPE2345"); !errors.Is(err, access.ErrUnknownCode) {
		t.Errorf("Approve(unknown) = %v, want ErrUnknownCode", err)
	}
	if err := access.Approve(ctx, b, code); err != nil {
		t.Fatalf("Approve: %v", err)
	}
	if v, err := g.Check(ctx, p, stranger, "hi again"); err != nil || v != access.Allow {
		t.Errorf("after approval Check = %v, %v; want allow", v, err)
	}
	if msgs := sent(t, b, "telegram", "99"); len(msgs) != 2 {
		t.Errorf("stranger got %d messages, want code + approval", len(msgs))
	}
	if err := access.Approve(ctx, b, code); !errors.Is(err, access.ErrUnknownCode) {
		t.Errorf("second Approve = %v, want ErrUnknownCode", err)
	}
}

func TestPairingCommandFromAllowedUser(t *testing.T) {
	g, b := open(t)
	ctx := t.Context()
	p := access.Policy{Channel: "slack", AllowFrom: []string{"UOWNER"}}
	if _, err := g.Check(ctx, p, access.Sender{ID: "UNEW", ChatID: "DNEW", DM: true}, "hello"); err != nil {
		t.Fatal(err)
	}
	code := codeRE.FindString(sent(t, b, "slack", "DNEW")[0].GetContent())

	owner := access.Sender{ID: "UOWNER", ChatID: "DOWNER", DM: true}
	// A stranger cannot approve themselves.
	if v, _ := g.Check(ctx, p, access.Sender{ID: "UNEW", ChatID: "DNEW", DM: true}, "/pairing approve "+code); v != access.PairingSent {
		t.Errorf("stranger's /pairing = %v, want pairing", v)
	}
	if v, err := g.Check(ctx, p, owner, "/pairing approve "+code); err != nil || v != access.Handled {
		t.Fatalf("owner's /pairing = %v, %v", v, err)
	}
	if ok, _ := g.Allowed(ctx, p, access.Sender{ID: "UNEW"}); !ok {
		t.Error("sender not allowed after /pairing approve")
	}
	replies := sent(t, b, "slack", "DOWNER")
	if len(replies) != 1 || !regexp.MustCompile(`Approved`).MatchString(replies[0].GetContent()) {
		t.Errorf("owner's replies = %v", replies)
	}
}

func TestCodesExpire(t *testing.T) {
	g, b := open(t, access.WithCodeTTL(time.Second))
	ctx := t.Context()
	if _, err := g.Check(ctx, access.Policy{Channel: "telegram"}, access.Sender{ID: "5", ChatID: "5", DM: true}, "x"); err != nil {
		t.Fatal(err)
	}
	code := codeRE.FindString(sent(t, b, "telegram", "5")[0].GetContent())
	codes, err := b.JS.KeyValue(ctx, b.Space.Bucket("pairing"))
	if err != nil {
		t.Fatal(err)
	}
	// The code's TTL removes it with a marker, which a watch sees.
	w, err := codes.Watch(ctx, "code."+code)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	for expired := false; !expired; {
		e := bustest.Receive(t, w.Updates(), 10*time.Second)
		expired = e != nil && e.Operation() == jetstream.KeyValuePurge
	}
	if _, err := codes.Get(ctx, "code."+code); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("code after its expiry marker: get = %v, want ErrKeyNotFound", err)
	}
	if err := access.Approve(ctx, b, code); !errors.Is(err, access.ErrUnknownCode) {
		t.Errorf("Approve(expired) = %v, want ErrUnknownCode", err)
	}
}

func TestOpenRejectsShortTTL(t *testing.T) {
	b := bustest.StartJetStream(t, access.Assets)
	if _, err := access.Open(t.Context(), b, access.WithCodeTTL(time.Millisecond)); err == nil {
		t.Error("Open accepted a 1ms code TTL")
	}
}
