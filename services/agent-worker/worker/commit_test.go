package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/worker"
)

// TestAckLostWithTheConnectionHoldsNoLaterTurn: a committed turn whose ack
// is lost on its way (a proxy holds it and cuts the worker's connection)
// is acked again, and the session's third message runs without waiting
// for the first's redelivery. The FIFO guard lets only the session's last
// answered message pass unacked: with a plain ack, on a 3-node cluster
// with lame-duck restarts, the third message waited for the first's
// redelivery after the ack wait (10 s), here 30 s.
func TestAckLostWithTheConnectionHoldsNoLaterTurn(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv := bustest.StartServer(t)
	direct := srv.Connect(t, "")
	hop := bustest.NewProxy(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	b := hop.Connect(t, srv.ClientURL())
	h, _ := startEdited(t, b, "w1", 5*time.Second, edits{
		config: func(c *worker.Config) { c.AckWait = config.Seconds(30 * time.Second) },
	})
	// Replies read on a connection of their own: the worker's is cut.
	out, _ := bustest.Outbound(t, direct, 100)
	h.llm.Enqueue(llmtest.Text("one"), llmtest.Text("two"), llmtest.Text("three"))
	reply := func(want string) {
		t.Helper()
		if got := bustest.Receive(t, out, 15*time.Second); got.GetContent() != want || got.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL {
			t.Fatalf("reply %q (%v), want %q", got.GetContent(), got.GetKind(), want)
		}
	}

	hop.CutAt(ctx, t, "$JS.ACK."+b.Space.InboundStream()+".", func() {
		send(t, direct, "c1", "1", "first")
		reply("one")
		// The ack follows the reply: flush until a flush is held behind
		// it, and fails with the cut.
		for ctx.Err() == nil {
			if err := b.NC.FlushTimeout(10 * time.Second); err != nil {
				return
			}
		}
	})
	send(t, direct, "c1", "2", "second")
	reply("two")
	send(t, direct, "c1", "3", "third")
	reply("three")
}

// TestBusyNakLostWithTheConnectionDelaysNoTurn: a message put back to wait
// for its session (the FIFO guard) whose nak is lost on its way (a proxy
// holds it and cuts the worker's connection) is put back again, and runs
// once its session is free. With a plain nak, lost as an ack was when the
// node leading the workers' consumer went lame duck, the message waited
// for its redelivery after the whole ack wait (10 s; here 30 s).
func TestBusyNakLostWithTheConnectionDelaysNoTurn(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv := bustest.StartServer(t)
	direct := srv.Connect(t, "")
	hop := bustest.NewProxy(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	b := hop.Connect(t, srv.ClientURL())
	h, _ := startEdited(t, b, "w1", 5*time.Second, edits{
		config: func(c *worker.Config) { c.AckWait = config.Seconds(30 * time.Second) },
	})
	out, _ := bustest.Outbound(t, direct, 100)
	first := llmtest.Hold("first", llmtest.Text("one"), llmtest.Echo)
	h.llm.Handle(first.Script)
	t.Cleanup(first.Release)

	send(t, direct, "c1", "1", "first")
	bustest.Receive(t, first.Asked, 15*time.Second)
	hop.CutAt(ctx, t, "$JS.ACK."+b.Space.InboundStream()+".", func() {
		// The first turn holds the session: the second is put back.
		send(t, direct, "c1", "2", "second")
		for ctx.Err() == nil {
			if err := b.NC.FlushTimeout(10 * time.Second); err != nil {
				return
			}
		}
	})
	first.Release()
	for _, want := range []string{"one", "echo: second"} {
		if got := bustest.Receive(t, out, 15*time.Second); got.GetContent() != want || got.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL {
			t.Fatalf("reply %q (%v), want %q", got.GetContent(), got.GetKind(), want)
		}
	}
}
