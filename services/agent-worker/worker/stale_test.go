package worker_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/profile/profiletest"
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
	b := bustest.StartJetStream(t)
	ctx, cancel := context.WithCancel(t.Context())
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Text("fresh"))
	model, err := llm.New(llm.Config{Name: "openai", APIBase: srv.URL(), APIKey: "k", Model: "test-model"})
	if err != nil {
		t.Fatal(err)
	}
	profiles := profiletest.Watch(ctx, t, b)
	cfg := worker.DefaultConfig()
	cfg.ID, cfg.Model, cfg.LeaseTTL = "w1", "test-model", bustest.TestLayout().LeaseTTL
	var redelivered atomic.Int64
	w, err := worker.New(ctx, cfg, worker.Deps{
		Bus: b, Model: model, Tools: noRunners{}, Profiles: profiles,
		Observer: worker.Observer{Redelivered: func() { redelivered.Add(1) }},
	}, worker.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	if err != nil {
		t.Fatal(err)
	}
	w.StaleReads(2)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); bustest.Receive(t, done, 30*time.Second); profiles.Stop() })
	out, stopOut := bustest.Outbound(t, b, 10)
	defer stopOut()
	send(t, b, "c1", "1", "hello")
	if o := bustest.Receive(t, out, 10*time.Second); o.GetContent() != "fresh" {
		t.Fatalf("reply %q", o.GetContent())
	}
	if n := redelivered.Load(); n != 0 {
		t.Errorf("the turn was put back %d times for a stale read", n)
	}
}
