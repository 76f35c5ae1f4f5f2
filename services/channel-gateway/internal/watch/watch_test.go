package watch_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/watch"
)

func TestWatcherMergesRepliesAndLive(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := context.Background()
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
	w, err := watch.Start(ctx, b, slog.New(slog.DiscardHandler), "api", "s.1")
	if err != nil {
		t.Fatal(err)
	}
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
	w.Stop(ctx)
	// Stop removes the watcher's consumer from the server.
	st, _ := b.JS.Stream(ctx, b.Space.OutboundStream())
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		for range st.ListConsumers(ctx).Info() {
			n++
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d consumers left after Stop", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A turn's deltas reach the reader before its final answer, although the
// two come by different subscriptions.
func TestWatcherKeepsLiveMessagesBeforeTheReplyAfterThem(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	w, err := watch.Start(ctx, b, slog.New(slog.DiscardHandler), "web", "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.WithoutCancel(ctx))
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
