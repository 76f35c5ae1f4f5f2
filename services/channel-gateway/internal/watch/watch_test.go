package watch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/watch"
)

func TestWatcherMergesRepliesAndLive(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	publish := func(live bool, content string) {
		t.Helper()
		kind := nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL
		if live {
			kind = nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA
		}
		data, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Kind: kind, Content: content})
		if live {
			if err := b.NC.Publish(b.Space.Live("api", "s.1"), data); err != nil {
				t.Fatal(err)
			}
			return
		}
		if _, err := b.JS.Publish(ctx, b.Space.Outbound("api", "s.1"), data); err != nil {
			t.Fatal(err)
		}
	}
	publish(false, "before") // not seen: the watch starts after it
	w, err := watch.New(ctx, b, "api", "s.1")
	if err != nil {
		t.Fatal(err)
	}
	stop := svctest.Run(t, w.Run, svctest.StopWithin(10*time.Second))
	publish(true, "delta")
	publish(false, "after")
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case m := <-w.C:
			got[m.GetContent()] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("got %v", got)
		}
	}
	if !got["delta"] || !got["after"] {
		t.Errorf("got %v", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Run removes the watcher's consumer from the server before it returns.
	st, err := b.JS.Stream(ctx, b.Space.OutboundStream())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range st.ListConsumers(ctx).Info() {
		n++
	}
	if n != 0 {
		t.Fatalf("%d consumers left after Run returned", n)
	}
	if err := w.Run(ctx); !errors.Is(err, watch.ErrRunning) {
		t.Errorf("second Run: %v, want ErrRunning", err)
	}
}

// A turn's deltas reach the reader before its final answer, although the
// two come by different subscriptions.
func TestWatcherKeepsLiveMessagesBeforeTheReplyAfterThem(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	w, err := watch.New(ctx, b, "web", "c1", watch.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	svctest.Run(t, w.Run)
	msg := func(kind nanofleetv1.OutboundKind, content string) []byte {
		data, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Kind: kind, Content: content})
		return data
	}
	const turns, deltas = 100, 3
	for turn := range turns {
		for d := range deltas {
			if err := b.NC.Publish(b.Space.Live("web", "c1"), msg(nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, fmt.Sprint(turn, "/", d))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.JS.Publish(ctx, b.Space.Outbound("web", "c1"), msg(nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, fmt.Sprint(turn))); err != nil {
			t.Fatal(err)
		}
		seen := 0
		for final := false; !final; {
			select {
			case m := <-w.C:
				switch m.GetKind() {
				case nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA:
					if want := fmt.Sprint(turn, "/", seen); m.GetContent() != want {
						t.Fatalf("turn %d: delta %q, want %q", turn, m.GetContent(), want)
					}
					seen++
				default:
					if m.GetContent() != fmt.Sprint(turn) || seen != deltas {
						t.Fatalf("turn %d: reply %q after %d of %d deltas", turn, m.GetContent(), seen, deltas)
					}
					final = true
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("turn %d: nothing after %d deltas", turn, seen)
			}
		}
	}
}

// TestNewGivesUpOnALostRequest: when the request that makes the watch's
// consumer is never answered (lost with a server that died), New fails
// after a few bounded tries (25 s in all) instead of holding its caller
// until the caller's context ends. Seen on a 3-node cluster with one node SIGKILLed: two API
// requests waited in New for minutes (the API allows a turn 10 minutes)
// while the fleet answered every other request.
func TestNewGivesUpOnALostRequest(t *testing.T) {
	// Every consumer creation is dropped.
	lost := lossyAPI(t, func(string) bool { return true })

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // as long as a turn may take
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := watch.New(ctx, lost, "api", "c1")
		done <- err
	}()
	if err := bustest.Receive(t, done, 40*time.Second); err == nil {
		t.Error("New succeeded though its consumer was never made")
	}
}

// TestNewTriesAgainSoonAfterALostRequest: a creation of the watch's
// consumer that is never answered (sent as the JetStream meta leader
// stepped down) is tried again within seconds. Each try waited
// bus.CallTimeout: on a 3-node cluster every restart of the meta
// leader's node, in lame duck mode or with SIGTERM, held the API
// requests and web chat messages made at that moment 10 s.
func TestNewTriesAgainSoonAfterALostRequest(t *testing.T) {
	// The first consumer creation is dropped.
	var dropped atomic.Bool
	lost := lossyAPI(t, func(string) bool { return dropped.CompareAndSwap(false, true) })

	// A try that waited out bus.CallTimeout, as each did, would end this
	// context before the try after it.
	ctx, cancel := context.WithTimeout(t.Context(), bus.CallTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		// Not run: the consumer is left to the server, which ends with
		// the test.
		_, err := watch.New(ctx, lost, "api", "c1")
		done <- err
	}()
	if err := bustest.Receive(t, done, 40*time.Second); err != nil {
		t.Fatalf("New after a lost creation, within %s: %v", bus.CallTimeout, err)
	}
	if !dropped.Load() {
		t.Fatal("no consumer creation was dropped")
	}
}

// lossyAPI is a bus whose JetStream API requests go through a domain
// nobody serves, relayed to the server's API, except the consumer
// creations drop says to lose, as requests lost with a meta leader that
// stepped down are.
func lossyAPI(t *testing.T, drop func(subject string) bool) *bus.Bus {
	t.Helper()
	srv := bustest.StartServer(t)
	b := srv.Connect(t, "")
	const api = "$JS.lost.API."
	relay, err := b.NC.Subscribe(api+">", func(m *nats.Msg) {
		if strings.HasPrefix(m.Subject, api+"CONSUMER.CREATE.") && drop(m.Subject) {
			return
		}
		resp, err := b.NC.Request("$JS.API."+strings.TrimPrefix(m.Subject, api), m.Data, 5*time.Second)
		if err == nil {
			_ = m.Respond(resp.Data)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Unsubscribe() })
	lost, err := bus.Connect(t.Context(), bus.Config{URL: srv.ClientURL(), Domain: "lost", Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lost.NC.Close)
	return lost
}
