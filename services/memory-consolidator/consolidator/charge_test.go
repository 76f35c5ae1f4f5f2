package consolidator

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/usage"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/memtest"
)

// TestSplit: a call's tokens are divided among a batch's users by the
// weight of their chunks, every token counted once.
func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int64
		ss   []share
		want []payerTokens
	}{
		{"one user pays all", 1100, []share{{"telegram:ada", 40}}, []payerTokens{{"telegram:ada", 1100}}},
		{"by weight", 1000, []share{{"a", 300}, {"b", 100}}, []payerTokens{{"a", 750}, {"b", 250}}},
		{"remainder to the first", 10, []share{{"a", 1}, {"b", 1}, {"c", 1}}, []payerTokens{{"a", 4}, {"b", 3}, {"c", 3}}},
		{"one payer's chunks together", 900, []share{{"a", 1}, {"b", 1}, {"a", 1}}, []payerTokens{{"a", 600}, {"b", 300}}},
		{"no weights: equal", 7, []share{{"a", 0}, {"b", 0}}, []payerTokens{{"a", 4}, {"b", 3}}},
		{"no payer keeps its share", 100, []share{{"", 1}, {"b", 1}}, []payerTokens{{"", 50}, {"b", 50}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := split(tc.n, tc.ss)
			if !slices.Equal(got, tc.want) {
				t.Errorf("split(%d, %v) = %v, want %v", tc.n, tc.ss, got, tc.want)
			}
			var sum int64
			for _, p := range got {
				sum += p.tokens
			}
			if sum != tc.n {
				t.Errorf("parts add up to %d, want %d", sum, tc.n)
			}
		})
	}
}

// TestMergeIsCounted: an entry logged but not applied (the consolidator
// stopped between the two) is finished by a model call that merges its
// turns into memory; that call is counted for the user of the request
// that finishes it.
func TestMergeIsCounted(t *testing.T) {
	_, b := memtest.Start(t)
	seqs := logUnapplied(t, b)
	model := llmtest.NewServer(t)
	model.Handle(func(req *llmtest.RecordedRequest) llmtest.Reply {
		return memtest.Consolidate(req).WithUsage(300, 30)
	})
	c := newConsolidator(t, b, "c1", model)
	req := &nanofleetv1.ConsolidationRequest{SessionKey: "cli:a", FromSeq: 1, ToSeq: seqs[1], Reason: "budget",
		Scope: memory.AgentScope("default").Key(), Payer: "cli:ada"}
	if _, err := c.rounds(t.Context(), req, memory.AgentScope("default"), c.holdDocument, nil, c.log); err != nil {
		t.Fatalf("round: %v", err)
	}
	if !strings.Contains(memoryOf(t, b), "fact 2 of cli:a") {
		t.Errorf("memory %q: the entry was not merged", memoryOf(t, b))
	}
	if n := model.RequestCount(); n != 1 {
		t.Errorf("%d model calls, want 1", n)
	}
	count, err := usage.Open(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := count.Spent(t.Context(), "cli:ada"); err != nil || got != 330 {
		t.Errorf("cli:ada counted %d (%v), want 330", got, err)
	}
}

// TestBatchIsSplitAmongItsUsers: rounds of two users' sessions queued
// behind the round leading a shared document are consolidated by one
// call, whose tokens are divided between the two users by the size of
// their chunks, every token counted once; the leader's own call is its
// user's alone.
func TestBatchIsSplitAmongItsUsers(t *testing.T) {
	const single, batched = 110, 1001 // the fake model's usage per call
	_, b := memtest.Start(t)
	g, model, c := gatedConsolidator(t, b, func(req *llmtest.RecordedRequest) llmtest.Reply {
		if strings.Contains(req.LastUserText(), "### Conversation C2\n") {
			return memtest.Consolidate(req).WithUsage(1000, 1)
		}
		return memtest.Consolidate(req).WithUsage(100, 10)
	})
	rounds := []struct {
		key, payer string
		turns      int
	}{{"cli:lead", "cli:lead", 1}, {"cli:a", "telegram:ada", 1}, {"cli:b", "slack:bob", 3}}
	done := make([]chan error, len(rounds))
	for i, r := range rounds {
		seqs := appendTurns(t, b, r.key, r.turns)
		req := &nanofleetv1.ConsolidationRequest{SessionKey: r.key, FromSeq: 1, ToSeq: seqs[len(seqs)-1], Reason: "budget",
			Scope: memory.AgentScope("default").Key(), Payer: r.payer}
		done[i] = make(chan error, 1)
		go func() {
			_, err := c.rounds(t.Context(), req, memory.AgentScope("default"), c.holdDocument, nil, c.log.With("session", r.key))
			done[i] <- err
		}()
		if i == 0 {
			bustest.Receive(t, g.entered, 10*time.Second) // the leader's call is held
			continue
		}
		bustest.Eventually(t, 10*time.Second, func() error {
			if n := waiting(c); n != i {
				return fmt.Errorf("%d rounds queued, want %d", n, i)
			}
			return nil
		})
	}
	close(g.open)
	for i := range rounds {
		if err := bustest.Receive(t, done[i], 20*time.Second); err != nil {
			t.Fatalf("round of %s: %v", rounds[i].key, err)
		}
	}
	if n := model.RequestCount(); n != 2 {
		t.Fatalf("%d model calls, want 2 (the leader's, then one for the two queued)", n)
	}
	count, err := usage.Open(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	spent := map[string]int64{}
	for _, r := range rounds {
		if spent[r.payer], err = count.Spent(t.Context(), r.payer); err != nil {
			t.Fatal(err)
		}
	}
	if spent["cli:lead"] != single {
		t.Errorf("the leader's user counted %d, want %d", spent["cli:lead"], single)
	}
	a, bob := spent["telegram:ada"], spent["slack:bob"]
	if a+bob != batched || a <= 0 || bob <= a {
		t.Errorf("the batched call of %d tokens counted %d for Ada (1 turn) and %d for Bob (3 turns), want all of it, Bob more", batched, a, bob)
	}
}
