package worker_test

import (
	"sync/atomic"
	"testing"
	"time"

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
