package bus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
)

// TestAckOutlivesAnAckLostWithTheConnection: an ack lost on its way (a
// proxy holds it and cuts the connection) is sent again until the server
// has it, and confirm says so only then. With m.Ack the ack was gone: on a
// 3-node cluster a worker's ack sent as the node leading the inbound
// consumer went lame duck was lost, the turn came again after the ack
// wait (10 s), and the session's later messages waited for it.
func TestAckOutlivesAnAckLostWithTheConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	srv := bustest.StartServer(t)
	b := srv.Connect(t, "")
	st, _ := oneJob(ctx, t, b, 1)
	hop := bustest.NewProxy(t, srv.ClientURL())
	conn := hop.Connect(t, srv.ClientURL())
	cons, err := conn.JS.Consumer(ctx, "JOBS", "w")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}

	var confirm func(context.Context) error
	hop.CutAt(ctx, t, "$JS.ACK.JOBS.w.", func() {
		confirm = bus.Ack(ctx, conn.NC, m)
		// The ack goes out from a goroutine of its own: flush until a
		// flush is held behind it, and fails with the cut (one flush
		// could go first, answered, and nothing was cut: CI, -race).
		for ctx.Err() == nil {
			if err := conn.NC.FlushTimeout(10 * time.Second); err != nil {
				return
			}
		}
	})
	if err := confirm(ctx); err != nil {
		t.Fatalf("ack lost with the connection: %v", err)
	}
	info, err := st.Consumer(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := info.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ci.NumAckPending != 0 || ci.AckFloor.Stream != 1 {
		t.Fatalf("after confirm: %s", fmt.Sprintf("%d pending acks, ack floor %d; want 0 and 1", ci.NumAckPending, ci.AckFloor.Stream))
	}
}

// TestAckConfirms: an ack that reaches the server is confirmed at once.
func TestAckConfirms(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b := bustest.StartJetStream(t)
	_, cons := oneJob(ctx, t, b, 1)
	m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.Ack(ctx, b.NC, m)(ctx); err != nil {
		t.Fatal(err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ci.NumAckPending != 0 {
		t.Fatalf("%d pending acks after confirm, want 0", ci.NumAckPending)
	}
}

// oneJob makes the stream JOBS (with replicas) holding one message,
// jobs.1, and its consumer w, with an ack wait no test waits for.
func oneJob(ctx context.Context, t *testing.T, b *bus.Bus, replicas int) (jetstream.Stream, jetstream.Consumer) {
	t.Helper()
	st, err := b.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "JOBS", Subjects: []string{"jobs.>"}, Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.JS.Publish(ctx, "jobs.1", []byte("job")); err != nil {
		t.Fatal(err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return st, cons
}
