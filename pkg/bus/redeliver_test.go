package bus_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
)

// TestRedeliverPending: after a restart, the server restores the
// deliveries its consumers had pending and hands them out again only
// after their ack wait; RedeliverPending has them handed out at the next
// fetch, counted as second deliveries, and leaves the consumers' ack
// wait as it was. Consumers without pending deliveries, and ones that
// take no acks, are left alone.
func TestRedeliverPending(t *testing.T) {
	const ackWait = 10 * time.Minute
	for _, redeliver := range []bool{false, true} {
		t.Run(map[bool]string{false: "restored", true: "redelivered"}[redeliver], func(t *testing.T) {
			dir := t.TempDir()
			srv := bustest.StartServerIn(t, dir)
			b := srv.Connect(t, "")
			ctx := t.Context()
			st := jobsStream(t, b)
			for _, subj := range []string{"jobs.1", "jobs.2"} {
				if _, err := b.JS.Publish(ctx, subj, []byte("job")); err != nil {
					t.Fatal(err)
				}
			}
			busy, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "busy", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: 5})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "idle", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "noack", AckPolicy: jetstream.AckNonePolicy}); err != nil {
				t.Fatal(err)
			}
			if got := fetchUpTo(t, busy, 2, 5*time.Second); len(got) != 2 {
				t.Fatalf("fetched %d messages, want 2", len(got))
			}
			srv.Shutdown()

			srv = bustest.StartServerIn(t, dir)
			b = srv.Connect(t, "")
			if redeliver {
				got, err := bus.RedeliverPending(ctx, b.JS)
				if err != nil {
					t.Fatal(err)
				}
				want := []bus.Redelivery{{Stream: "JOBS", Consumer: "busy", Messages: 2}}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("RedeliverPending = %+v, want %+v", got, want)
				}
			}
			cons, err := b.JS.Consumer(ctx, "JOBS", "busy")
			if err != nil {
				t.Fatal(err)
			}
			msgs := fetchUpTo(t, cons, 2, time.Second)
			if !redeliver {
				if len(msgs) != 0 {
					t.Fatalf("fetched %d messages within the ack wait without RedeliverPending", len(msgs))
				}
				return
			}
			if len(msgs) != 2 {
				t.Fatalf("fetched %d messages after RedeliverPending, want 2", len(msgs))
			}
			for _, m := range msgs {
				meta, err := m.Metadata()
				if err != nil {
					t.Fatal(err)
				}
				if meta.NumDelivered != 2 {
					t.Errorf("%s: delivery %d, want 2 (the count kept)", m.Subject(), meta.NumDelivered)
				}
			}
			for _, name := range []string{"busy", "idle"} {
				c, err := b.JS.Consumer(ctx, "JOBS", name)
				if err != nil {
					t.Fatal(err)
				}
				if w := c.CachedInfo().Config.AckWait; w != ackWait {
					t.Errorf("consumer %s: ack wait %s after RedeliverPending, want %s", name, w, ackWait)
				}
			}
		})
	}
}
