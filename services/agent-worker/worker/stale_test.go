package worker_test

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/services/agent-worker/worker"
)

// TestFIFOGuardReadsPastAStaleReplica: the FIFO guard reads the inbound
// stream by direct get, which any replica answers, and one behind its
// leader does not have the turn's own message yet (on a 3-node cluster,
// 7 % of the reads of a message just stored). Holding that message, the
// guard knows such an answer is stale: it reads again, instead of putting
// the turn back with a warning (a healthy cluster logged "fifo check …
// message not found" every 10 s and redelivered 1–13 of 800 turns).
func TestFIFOGuardReadsPastAStaleReplica(t *testing.T) {
	var redelivered atomic.Int64
	h, _ := startEdited(t, bustest.StartJetStream(t), "w1", 5*time.Second, edits{
		deps:   func(d *worker.Deps) { d.Observer = worker.Observer{Redelivered: func() { redelivered.Add(1) }} },
		before: func(w *worker.Worker) { w.StaleReads(2) },
	})
	h.llm.Enqueue(llmtest.Text("fresh"))
	h.send(t, "c1", "1", "hello")
	if o := h.next(t); o.GetContent() != "fresh" {
		t.Fatalf("reply %q", o.GetContent())
	}
	if n := redelivered.Load(); n != 0 {
		t.Errorf("the turn was put back %d times for a stale read", n)
	}
}

// TestAckedMessageTheStoreKeptHoldsNoSession: a message acknowledged but
// still in the inbound stream is no turn waiting. The store keeps one when
// it loses the removal: an all-in-one whose disk filled up ("Critical
// write error … no space left on device") had, after space was freed and
// a restart, its acked message back in the stream below the consumer's ack
// floor; the FIFO guard took it for the session's oldest waiting message
// and put every later message of the session back, forever. Here the
// inbound stream keeps every acked message (limits retention), so the
// session's third message finds two such messages before it.
func TestAckedMessageTheStoreKeptHoldsNoSession(t *testing.T) {
	b := bustest.StartJetStream(t)
	keepAcked(t, b)
	h, _ := startEdited(t, b, "w1", 5*time.Second, edits{})
	st, err := b.JS.Stream(t.Context(), b.Space.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.Consumer(t.Context(), b.Space.WorkerConsumer())
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"one", "two", "three"} {
		h.llm.Enqueue(llmtest.Text("re: " + text))
		h.send(t, "c1", strconv.Itoa(i+1), text)
		if o := h.next(t); o.GetContent() != "re: "+text {
			t.Fatalf("reply %d: %q", i+1, o.GetContent())
		}
		// Its ack reached the server: the next message finds it acked.
		bustest.Eventually(t, 10*time.Second, func() error {
			info, err := cons.Info(t.Context())
			if err != nil {
				return err
			}
			if floor := info.AckFloor.Stream; floor < uint64(i+1) {
				return fmt.Errorf("ack floor %d, want %d", floor, i+1)
			}
			return nil
		})
	}
	// The third message's guard removed the two before it; the third
	// stays (this stream keeps what is acked).
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 || info.State.FirstSeq != 3 {
		t.Errorf("inbound stream holds %d messages from seq %d, want the third alone", info.State.Msgs, info.State.FirstSeq)
	}
}

// keepAcked remakes the inbound stream with limits retention, so that an
// acked message stays in it, as it does when the store lost its removal.
func keepAcked(t *testing.T, b *bus.Bus) {
	t.Helper()
	ctx := t.Context()
	name := b.Space.InboundStream()
	st, err := b.JS.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if err := b.JS.DeleteStream(ctx, name); err != nil {
		t.Fatal(err)
	}
	cfg.Retention = jetstream.LimitsPolicy
	if _, err := b.JS.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}
