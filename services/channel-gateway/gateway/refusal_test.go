package gateway_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// sender is a recorder whose platform sends the given messages once the
// gateway runs, and reports what Publish returned to it.
type sender struct {
	*recorder
	send    []*nanofleetv1.InboundMessage
	results chan error
}

func (s *sender) Run(ctx context.Context, in gateway.Inbox) error {
	for _, m := range s.send {
		s.results <- in.Publish(ctx, m)
	}
	<-ctx.Done()
	return nil
}

// TestRefusedMessagesAreAnsweredOnThePlatform: a message the fleet will
// not take gets its reason as a reply at once, delivered by the adapter
// itself, and the adapter sees success so the platform does not resend.
func TestRefusedMessagesAreAnsweredOnThePlatform(t *testing.T) {
	full := errors.New("storage full: /data has 0 KiB free")
	tests := []struct {
		name    string
		content string
		storage error
		// late: the guard sees the store full only once the publish has
		// failed (a disk filled at once: the server drops the publish
		// unanswered; here a sealed stream refuses it). The API answered
		// "The fleet is not reachable" then.
		late  bool
		reply string
	}{
		{"too large", strings.Repeat("x", gateway.MaxContentBytes+1), nil, false, "Message too large"},
		{"storage full", "hello", full, false, "Storage full"},
		{"storage full during the publish", "hello", full, true, "Storage full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bustest.StartJetStream(t, gateway.Assets)
			s := &sender{recorder: newRecorder(), results: make(chan error, 1),
				send: []*nanofleetv1.InboundMessage{{Id: "e1", Channel: "test", ChatId: "c1", Content: tt.content}}}
			g, err := gateway.New(gateway.DefaultConfig(), b, []gateway.Adapter{s})
			if err != nil {
				t.Fatal(err)
			}
			var looks atomic.Int32
			g.Storage = func() error {
				if tt.late && looks.Add(1) == 1 {
					return nil
				}
				return tt.storage
			}
			if tt.late {
				bustest.SealStream(t, b, b.Space.InboundStream())
			}
			svctest.Run(t, g.Run)
			select {
			case err := <-s.results:
				if err != nil {
					t.Fatalf("the adapter got %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Publish did not return")
			}
			select {
			case m := <-s.delivered:
				if m.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR || m.GetChatId() != "c1" || !strings.Contains(m.GetContent(), tt.reply) {
					t.Errorf("reply %+v, want an error reply saying %q", m, tt.reply)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no reply delivered")
			}
			info, err := b.JS.Stream(t.Context(), b.Space.InboundStream())
			if err != nil {
				t.Fatal(err)
			}
			if n := info.CachedInfo().State.Msgs; n != 0 {
				t.Errorf("%d messages stored", n)
			}
		})
	}
}

func TestPublishRefusalsAreTyped(t *testing.T) {
	b := bustest.StartJetStream(t, gateway.Assets)
	g := newPublisher(t, b)
	var storage error
	g.Storage = func() error { return storage }
	in := func(content string) *nanofleetv1.InboundMessage {
		return &nanofleetv1.InboundMessage{Id: "m" + content[:1], Channel: "test", ChatId: "c1", Content: content}
	}
	if err := g.Publish(t.Context(), in(strings.Repeat("y", gateway.MaxContentBytes+1))); !errors.Is(err, gateway.ErrTooLarge) {
		t.Errorf("oversize: %v", err)
	}
	for _, reason := range []string{"disk full", "storage full: the filesystem of /data has 1 MiB free of 2 GiB"} {
		storage = errors.New(reason)
		err := g.Publish(t.Context(), in("z"))
		if !errors.Is(err, gateway.ErrStorageFull) || strings.Count(err.Error(), "storage full") != 1 || !strings.Contains(err.Error(), reason) {
			t.Errorf("while full (%s): %v", reason, err)
		}
	}
	storage = nil
	if err := g.Publish(t.Context(), in("z")); err != nil {
		t.Errorf("after: %v", err)
	}
	// The inbound stream at its limit (an operator's max messages with
	// discard new) is storage full too, not "not reachable".
	st, err := b.JS.Stream(t.Context(), b.Space.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxMsgs, cfg.Discard = 1, jetstream.DiscardNew
	if _, err := b.JS.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := g.Publish(t.Context(), in("w")); !errors.Is(err, gateway.ErrStorageFull) {
		t.Errorf("at the stream's limit: %v", err)
	}
}

func TestContentLimit(t *testing.T) {
	tests := []struct{ tokens, want int }{
		{0, gateway.MaxContentBytes},
		{8192, 32768},
		{200_000, 800_000},
		{1_000_000, gateway.MaxContentBytes},
	}
	for _, tt := range tests {
		if got := gateway.ContentLimit(tt.tokens); got != tt.want {
			t.Errorf("ContentLimit(%d) = %d, want %d", tt.tokens, got, tt.want)
		}
	}
}
