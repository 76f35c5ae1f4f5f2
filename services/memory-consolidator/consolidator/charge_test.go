package consolidator

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

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
	seqs := appendTurns(t, b, "cli:a", 2)
	e := &nanofleetv1.HistoryEntry{
		SessionKey: "cli:a", Scope: memory.AgentScope("default").Key(), FromSeq: 1, ToSeq: seqs[1],
		Text: "[2026-01-01 00:00] R001: and R002: said.", Reason: "budget", CreatedAt: timestamppb.Now(),
	}
	if _, err := memory.OpenLog(b).Append(t.Context(), e, 0); err != nil {
		t.Fatal(err)
	}
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
