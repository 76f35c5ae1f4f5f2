package worker_test

import (
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/worker"
)

// TestTooLargeTurnIsNotRetried: a turn whose record the store refuses for
// its size (here the model's 5 MB answer, above the streams' 4 MiB) is
// set aside at once: one model call, an error reply, a dead letter, and
// the session goes on.
func TestTooLargeTurnIsNotRetried(t *testing.T) {
	h := start(t)
	h.llm.Enqueue(llmtest.Text(strings.Repeat("z", 5<<20)), llmtest.Text("small answer"))
	h.send(t, "c1", "1", "write me five megabytes")
	o := h.next(t)
	if o.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR || o.GetReplyTo() != "1" || !strings.Contains(o.GetContent(), "more than the fleet can store") {
		t.Fatalf("reply = %.300v", o)
	}
	// The next message of the session runs only once the first is done
	// with; a retry of the first would have called the model before it.
	h.send(t, "c1", "2", "again")
	if o := h.next(t); o.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL || o.GetContent() != "small answer" {
		t.Fatalf("next reply = %.300v", o)
	}
	if n := h.llm.RequestCount(); n != 2 {
		t.Errorf("model called %d times, want 2 (no retry of the turn too large to store)", n)
	}
	info, err := h.b.JS.Stream(t.Context(), h.b.Space.DeadLetterStream())
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 1 {
		t.Errorf("%d dead letters, want 1", n)
	}
}

// TestOversizeMessageIsCut: a message larger than the context budget
// reaches the model cut to half of it, with a note saying so.
func TestOversizeMessageIsCut(t *testing.T) {
	h := start(t)
	h.llm.Enqueue(llmtest.Text("read part of it"))
	cfg := worker.DefaultConfig()
	limit := (cfg.ContextWindowTokens - cfg.Loop.MaxTokens) / 2 * 4
	h.send(t, "c1", "1", strings.Repeat("é", limit)) // 2 bytes each: twice the limit
	if o := h.next(t); o.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL {
		t.Fatalf("reply = %.300v", o)
	}
	req, ok := h.llm.LastRequest()
	if !ok {
		t.Fatal("no model request")
	}
	got := req.LastUserText()
	body, note, found := strings.Cut(got, "\n\n[nanofleet: the message was cut here.")
	if !found || !strings.Contains(note, "Tell the user that the rest was not read") {
		t.Fatalf("no note in the message the model got (%d bytes, ends %q)", len(got), got[max(0, len(got)-200):])
	}
	if len(body) > limit || len(body) < limit-1 || strings.Trim(body, "é") != "" {
		t.Errorf("kept %d bytes (limit %d), or cut inside a character", len(body), limit)
	}
}
