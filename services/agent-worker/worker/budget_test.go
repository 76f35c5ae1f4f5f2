package worker_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/usage"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/worker"
)

// TestDailyTokenBudget: a user's turns run until their tokens of the day
// reach the budget (the turn that crosses it finishes); the next turn is
// answered with the budget message without calling the model, and a
// different user is not affected.
func TestDailyTokenBudget(t *testing.T) {
	b := bustest.StartJetStream(t, usage.Assets)
	h, _ := startEdited(t, b, "w1", time.Minute, edits{config: func(c *worker.Config) { c.DailyTokenBudget = 100 }})
	h.llm.Handle(func(*llmtest.RecordedRequest) llmtest.Reply { return llmtest.Text("fine").WithUsage(50, 10) })
	steps := []struct {
		chat, id   string
		wantBudget bool
		wantCalls  int   // model requests so far
		wantTokens int64 // the user's tokens counted so far
	}{
		{"c1", "1", false, 1, 60},  // 60 tokens
		{"c1", "2", false, 2, 120}, // 120: crosses the budget, still answered
		{"c1", "3", true, 2, 120},  // refused without the model
		{"c2", "4", true, 2, 120},  // the same user in another chat
	}
	for _, s := range steps {
		h.send(t, s.chat, s.id, "hello "+s.id)
		o := h.next(t)
		gotBudget := strings.Contains(o.GetContent(), "You have used today's token budget (120 of 100 tokens)")
		if gotBudget != s.wantBudget || o.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL {
			t.Errorf("message %s: reply %q (%v)", s.id, o.GetContent(), o.GetKind())
		}
		if n := h.llm.RequestCount(); n != s.wantCalls {
			t.Errorf("message %s: %d model requests, want %d", s.id, n, s.wantCalls)
		}
		// A turn's tokens are counted after it lets its session go (the
		// next message need not wait for the bookkeeping), so a message
		// sent the instant the reply arrived may start before the count:
		// wait for it, as a user's next message would come later.
		waitCounted(t, b, s.wantTokens)
	}
	// Another user has their own budget.
	sendAs(t, h, "c3", "5", "other-user", "hello")
	if o := h.next(t); o.GetContent() != "fine" {
		t.Errorf("another user: %q", o.GetContent())
	}
}

// waitCounted waits until the usage bucket holds want tokens in all.
func waitCounted(t *testing.T, b *bus.Bus, want int64) {
	t.Helper()
	kv, err := b.KV(t.Context(), usage.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 10*time.Second, func() error {
		keys, err := kv.ListKeys(t.Context())
		if err != nil {
			return err
		}
		var total int64
		for k := range keys.Keys() {
			e, err := kv.Get(t.Context(), k)
			if err != nil {
				return err
			}
			n, err := strconv.ParseInt(string(e.Value()), 10, 64)
			if err != nil {
				return err
			}
			total += n
		}
		if total != want {
			return fmt.Errorf("usage bucket counts %d tokens, want %d", total, want)
		}
		return nil
	})
}

// TestBudgetBoundsTheTurn: what is left of the user's budget bounds the
// turn that starts with it, not only the next: once its model calls have
// spent it, the model is asked once more without tools to answer. Before,
// a model calling tools in a loop ran its 40 iterations: one turn spent
// 45,100 tokens of a 5,000-token budget.
func TestBudgetBoundsTheTurn(t *testing.T) {
	b := bustest.StartJetStream(t, usage.Assets)
	h, _ := startEdited(t, b, "w1", time.Minute, edits{config: func(c *worker.Config) { c.DailyTokenBudget = 100 }})
	h.llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		if len(r.Tools) == 0 {
			return llmtest.Text("answered").WithUsage(50, 10)
		}
		return llmtest.ToolCalls(llmtest.Call("nothing_here", `{}`)).WithUsage(50, 10)
	})
	h.send(t, "c1", "1", "loop")
	if o := h.next(t); o.GetContent() != "answered" {
		t.Errorf("reply %q", o.GetContent())
	}
	// 60, 120 (the budget spent), then the call without tools.
	if n := h.llm.RequestCount(); n != 3 {
		t.Errorf("%d model requests, want 3", n)
	}
}
