package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
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
	l := startBehindProxy(t)
	l.h.llm.Enqueue(llmtest.Text("one"), llmtest.Text("two"), llmtest.Text("three"))

	l.cutAtAck(ctx, t, func() {
		send(t, l.direct, "c1", "1", "first")
		l.reply(t, "one") // the ack follows the reply
	})
	send(t, l.direct, "c1", "2", "second")
	l.reply(t, "two")
	send(t, l.direct, "c1", "3", "third")
	l.reply(t, "three")
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
	l := startBehindProxy(t)
	first := llmtest.Hold("first", llmtest.Text("one"), llmtest.Echo)
	l.h.llm.Handle(first.Script)
	t.Cleanup(first.Release)

	send(t, l.direct, "c1", "1", "first")
	bustest.Receive(t, first.Asked, 15*time.Second)
	l.cutAtAck(ctx, t, func() {
		// The first turn holds the session: the second is put back.
		send(t, l.direct, "c1", "2", "second")
	})
	first.Release()
	l.reply(t, "one")
	l.reply(t, "echo: second")
}

// behindProxy is a worker whose connection goes through a proxy that
// can hold and cut it, with an ack wait and a lease TTL (30 s) no test
// waits for.
type behindProxy struct {
	hop    *bustest.Proxy
	b      *bus.Bus // the worker's connection, through hop
	direct *bus.Bus // the test's own, never cut
	h      *harness
	out    <-chan *nanofleetv1.OutboundMessage
}

func startBehindProxy(t *testing.T) *behindProxy {
	t.Helper()
	srv := bustest.StartServer(t)
	l := &behindProxy{direct: srv.Connect(t, "")}
	l.hop = bustest.NewProxy(t, srv.ClientURL())
	l.b = l.hop.Connect(t, srv.ClientURL())
	// A lease that outlives a cut: with the tests' 3 s, a renewal held
	// with the cut (one try of 2 s) let it expire, and a turn running
	// across the cut was abandoned (seen under -race on a loaded machine).
	layout := bustest.TestLayout()
	layout.LeaseTTL, layout.ReplayWindow = 30*time.Second, time.Minute
	if err := bus.Provision(t.Context(), l.direct, layout); err != nil {
		t.Fatal(err)
	}
	l.h, _ = startEdited(t, l.b, "w1", 5*time.Second, edits{
		config: func(c *worker.Config) {
			c.AckWait = config.Seconds(30 * time.Second)
			c.LeaseTTL = layout.LeaseTTL
		},
	})
	// Replies read on a connection of their own: the worker's is cut.
	l.out, _ = bustest.Outbound(t, l.direct, 100)
	return l
}

// cutAtAck holds the worker's first ack or nak of an inbound message
// sent while do runs, and cuts the worker's connection with it.
func (l *behindProxy) cutAtAck(ctx context.Context, t *testing.T, do func()) {
	t.Helper()
	l.hop.CutAt(ctx, t, "$JS.ACK."+l.b.Space.InboundStream()+".", func() {
		do()
		// Flush until a flush is held behind the ack, and fails with
		// the cut.
		for ctx.Err() == nil {
			if err := l.b.NC.FlushTimeout(10 * time.Second); err != nil {
				return
			}
		}
	})
}

// reply fails the test unless the next reply is a final want.
func (l *behindProxy) reply(t *testing.T, want string) {
	t.Helper()
	if got := bustest.Receive(t, l.out, 15*time.Second); got.GetContent() != want || got.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL {
		t.Fatalf("reply %q (%v), want %q", got.GetContent(), got.GetKind(), want)
	}
}
