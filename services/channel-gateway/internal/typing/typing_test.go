package typing_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/typing"
)

const wait = 5 * time.Second

// sends returns a send function that reports each call on the channel.
func sends() (chan struct{}, func(context.Context) error) {
	ch := make(chan struct{}, 100)
	return ch, func(context.Context) error { ch <- struct{}{}; return nil }
}

func next(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait):
		t.Fatalf("no typing action %s within %s", what, wait)
	}
}

// stops waits until the loop has stopped: no send for several renewal
// periods (the stop itself arrives asynchronously).
func stops(t *testing.T, ch chan struct{}, every time.Duration, why string) {
	t.Helper()
	bustest.Eventually(t, wait, func() error {
		for {
			select {
			case <-ch:
			default:
				select {
				case <-ch:
					return fmt.Errorf("still typing after %s", why)
				case <-time.After(5 * every):
					return nil
				}
			}
		}
	})
}

// watching is an indicator for channel "chat" renewing every every for at
// most limit, watching for turns' ends until the test ends.
func watching(t *testing.T, every, limit time.Duration) (*bus.Bus, *typing.Indicator) {
	t.Helper()
	b := bustest.StartJetStream(t)
	ind := typing.New(b, "chat", every, limit)
	stop, err := ind.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return b, ind
}

func TestStopsWhenTheTurnEnds(t *testing.T) {
	tests := []struct {
		name string
		kind nanofleetv1.OutboundKind
		last bool // the turn's last reply
		stop bool
	}{
		{"final answer", nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, true, true},
		{"error", nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR, true, true},
		{"the message tool's answer, last of its turn", nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE, true, true},
		{"a message tool's answer mid-turn keeps typing", nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE, false, false},
		{"progress keeps typing", nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, ind := watching(t, 20*time.Millisecond, time.Minute)
			ch, send := sends()
			ind.Start("c1", send)
			next(t, ch, "at start")
			next(t, ch, "at renewal")
			data, err := proto.Marshal(&nanofleetv1.OutboundMessage{Kind: tt.kind, ChatId: "c1", LastOfTurn: tt.last})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.NC.Publish(b.Space.OutboundChannel("chat"), data); err != nil {
				t.Fatal(err)
			}
			if err := b.NC.Flush(); err != nil {
				t.Fatal(err)
			}
			if !tt.stop {
				for range 3 {
					next(t, ch, "after a reply that does not end the turn")
				}
				ind.Stop("c1")
				stops(t, ch, 20*time.Millisecond, "Stop")
				return
			}
			stops(t, ch, 20*time.Millisecond, "the turn ended")
		})
	}
}

func TestStopsAtTheLimitAndCanStartAgain(t *testing.T) {
	_, ind := watching(t, 10*time.Millisecond, 100*time.Millisecond)
	ch, send := sends()
	ind.Start("c1", send)
	next(t, ch, "at start")
	ind.Start("c1", func(context.Context) error { t.Error("a second loop for a typing chat"); return nil })
	stops(t, ch, 10*time.Millisecond, "the time limit")
	ind.Start("c1", send)
	next(t, ch, "after starting again")
	ind.Stop("c1")
}

func TestNothingBeforeWatch(t *testing.T) {
	b := bustest.StartJetStream(t)
	ind := typing.New(b, "chat", 10*time.Millisecond, time.Minute)
	ind.Start("c1", func(context.Context) error { t.Error("typing action without Watch"); return nil })
	stop, err := ind.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// Had the first Start begun a loop, this one would be refused as a
	// second loop for the chat.
	ch, send := sends()
	ind.Start("c1", send)
	next(t, ch, "after Watch")
	ind.Stop("c1")
}

func TestCheckTiming(t *testing.T) {
	for _, c := range []struct {
		every, most time.Duration
		ok          bool
	}{
		{time.Second, time.Minute, true},
		{time.Second, time.Second, true},
		{0, time.Minute, false},
		{-time.Second, time.Minute, false},
		{time.Minute, time.Second, false},
	} {
		if err := typing.CheckTiming(c.every, c.most); (err == nil) != c.ok {
			t.Errorf("CheckTiming(%s, %s) = %v, want ok %v", c.every, c.most, err, c.ok)
		}
	}
}
