package bus_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
)

// TestResetPendingRedeliversAtOnce: deliveries pending when a server
// stopped are restored with it and wait out their ack wait (ten minutes
// here); ResetPending hands them out again at once, each consumer from
// its own ack floor, and leaves consumers with nothing pending alone.
func TestResetPendingRedeliversAtOnce(t *testing.T) {
	dir := t.TempDir()
	s1 := bustest.StartServerIn(t, dir)
	b1 := s1.Connect(t, "")
	ctx := t.Context()
	const ackWait = 10 * time.Minute
	st, err := b1.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "RESET_T", Subjects: []string{"reset.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "idle"} {
		if _, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if _, err := b1.JS.Publish(ctx, "reset.x", fmt.Appendf(nil, "m%d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(st jetstream.Stream, consumer string, n int, wait time.Duration) []jetstream.Msg {
		t.Helper()
		c, err := st.Consumer(ctx, consumer)
		if err != nil {
			t.Fatal(err)
		}
		batch, err := c.Fetch(n, jetstream.FetchMaxWait(wait))
		if err != nil {
			t.Fatal(err)
		}
		var msgs []jetstream.Msg
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		return msgs
	}
	// a: m1 and m2 pending. b: m1 acknowledged, m2 pending. idle:
	// nothing asked.
	if got := fetch(st, "a", 2, 5*time.Second); len(got) != 2 {
		t.Fatalf("a fetched %d messages, want 2", len(got))
	}
	got := fetch(st, "b", 2, 5*time.Second)
	if len(got) != 2 {
		t.Fatalf("b fetched %d messages, want 2", len(got))
	}
	if err := got[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	s1.Shutdown()

	s2 := bustest.StartServerIn(t, dir)
	b2 := s2.Connect(t, "")
	st2, err := b2.JS.Stream(ctx, "RESET_T")
	if err != nil {
		t.Fatal(err)
	}
	for _, consumer := range []string{"a", "b"} {
		if got := fetch(st2, consumer, 1, 300*time.Millisecond); len(got) != 0 {
			t.Fatalf("%s was redelivered %q before any reset: a restored delivery waits for its ack wait", consumer, got[0].Data())
		}
	}
	reset, err := bus.ResetPending(ctx, b2.JS)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(reset, func(x, y bus.PendingReset) int { return strings.Compare(x.Consumer, y.Consumer) })
	want := []bus.PendingReset{{Stream: "RESET_T", Consumer: "a", Messages: 2}, {Stream: "RESET_T", Consumer: "b", Messages: 1}}
	if !slices.Equal(reset, want) {
		t.Fatalf("reset %+v, want %+v", reset, want)
	}
	for consumer, want := range map[string][]string{"a": {"m1", "m2"}, "b": {"m2"}} {
		var seen []string
		for _, m := range fetch(st2, consumer, len(want), 5*time.Second) {
			seen = append(seen, string(m.Data()))
		}
		if !slices.Equal(seen, want) {
			t.Errorf("%s redelivered %q after the reset, want %q", consumer, seen, want)
		}
	}
}
