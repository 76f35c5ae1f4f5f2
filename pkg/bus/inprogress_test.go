package bus_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
)

// TestInProgressHoldsRedelivery: while InProgress ticks, a message held
// three times its AckWait is not redelivered; once stopped, it is.
func TestInProgressHoldsRedelivery(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	st := jobsStream(t, b)
	if _, err := b.JS.Publish(ctx, "jobs.1", []byte("job")); err != nil {
		t.Fatal(err)
	}
	const ackWait = 500 * time.Millisecond
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(wait time.Duration) []jetstream.Msg { return fetchUpTo(t, cons, 1, wait) }
	first := fetch(5 * time.Second)
	if len(first) != 1 {
		t.Fatalf("first fetch: %d messages", len(first))
	}
	stop := bus.InProgress(ctx, first[0], ackWait/5)
	if again := fetch(3 * ackWait); len(again) != 0 {
		stop()
		t.Fatal("redelivered while in progress")
	}
	stop()
	if again := fetch(5 * time.Second); len(again) != 1 {
		t.Fatal("not redelivered after InProgress stopped")
	}
}

// fetchUpTo fetches at most n messages from c, waiting at most wait.
func fetchUpTo(t *testing.T, c jetstream.Consumer, n int, wait time.Duration) []jetstream.Msg {
	t.Helper()
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
