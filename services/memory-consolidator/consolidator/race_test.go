package consolidator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/memtest"
)

// appendTurns commits n turns "R001: … FACT: fact 1." … to the session.
func appendTurns(t *testing.T, b *bus.Bus, key string, n int) []uint64 {
	t.Helper()
	ctx := t.Context()
	sessions, err := session.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	var last uint64
	for i := 1; i <= n; i++ {
		rec := &nanofleetv1.TurnRecord{TurnId: fmt.Sprint(key, i), Messages: []*nanofleetv1.ChatMessage{
			{Role: "user", Content: fmt.Sprintf("R%03d: hello. FACT: fact %d.", i, i)},
			{Role: "assistant", Content: "noted"},
		}}
		seq, err := sessions.Append(ctx, key, rec, last)
		if err != nil {
			t.Fatal(err)
		}
		last = seq
		seqs = append(seqs, seq)
	}
	return seqs
}

func newConsolidator(t *testing.T, b *bus.Bus, id string, srv *llmtest.Server) *Consolidator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ID = id
	cfg.ChunkTokens = 100 // a few turns per entry
	c, err := New(t.Context(), cfg, Deps{Bus: b, Model: memtest.Model(t, srv)}, WithLogger(memtest.Logger(t).With("c", id)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkExactlyOnce asserts every turn is in exactly one entry and every
// entry was applied to memory once.
func checkExactlyOnce(t *testing.T, b *bus.Bus, key string, n int) {
	t.Helper()
	entries := memtest.Coverage(t, b, key)
	for i := 1; i <= n; i++ {
		if c := memtest.Count(entries, fmt.Sprintf("R%03d:", i)); c != 1 {
			t.Errorf("turn %d of %s is in %d entries, want 1:\n%s", i, key, c, memtest.Describe(entries))
		}
	}
	docs, _ := memory.OpenDocs(t.Context(), b)
	doc, _, _ := docs.Get(t.Context(), memory.AgentScope("default"))
	applied := 0
	for _, r := range doc.GetRecent() {
		if r.GetSessionKey() == key {
			applied++
		}
	}
	if applied != len(entries) {
		t.Errorf("%s: %d entries applied to memory, want %d", key, applied, len(entries))
	}
	if got := memory.AppliedUpTo(doc, key); got != entries[len(entries)-1].GetToSeq() {
		t.Errorf("%s: applied marker %d, want %d", key, got, entries[len(entries)-1].GetToSeq())
	}
}

func TestTwoConsolidatorsCommitEachEntryOnce(t *testing.T) {
	srv, b1 := memtest.Start(t)
	b2 := srv.Connect(t, "")
	model := llmtest.NewServer(t, llmtest.WithLatency(20*time.Millisecond))
	model.Handle(memtest.Consolidate)
	c1 := newConsolidator(t, b1, "c1", model)
	c2 := newConsolidator(t, b2, "c2", model)
	const key = "cli:race"
	seqs := appendTurns(t, b1, key, 24)

	t.Run("through the queue", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for _, c := range []*Consolidator{c1, c2} {
			wg.Go(func() { _ = c.Run(ctx) })
		}
		defer func() { cancel(); wg.Wait() }()
		// Overlapping and repeated requests, as workers publish them.
		for _, to := range []int{6, 6, 12, 18, 12, 24, 24} {
			for _, from := range []uint64{1, seqs[0] + 1} {
				req := &nanofleetv1.ConsolidationRequest{SessionKey: key, FromSeq: from, ToSeq: seqs[to-1], Reason: "budget", Scope: memory.AgentScope("default").Key()}
				if err := memory.PublishRequest(t.Context(), b1, req); err != nil {
					t.Fatal(err)
				}
			}
		}
		memtest.WaitCursor(t, b1, key, seqs[23], 20*time.Second)
		checkExactlyOnce(t, b1, key, 24)
	})

	t.Run("without the lease", func(t *testing.T) {
		// The conditional writes alone keep the entries exactly once, as
		// when a lease expires under a slow consolidator.
		const key = "cli:cas"
		seqs := appendTurns(t, b1, key, 16)
		req := &nanofleetv1.ConsolidationRequest{SessionKey: key, FromSeq: 1, ToSeq: seqs[15], Reason: "new", Scope: memory.AgentScope("default").Key()}
		var wg sync.WaitGroup
		for i := range 6 {
			c := []*Consolidator{c1, c2}[i%2]
			wg.Go(func() {
				if _, err := c.rounds(t.Context(), req, memory.AgentScope("default"), c.log); err != nil {
					t.Errorf("rounds: %v", err)
				}
			})
		}
		wg.Wait()
		checkExactlyOnce(t, b1, key, 16)
		sessions, _ := session.Open(t.Context(), b1)
		info, _, _ := sessions.Info(t.Context(), key)
		if info.GetConsolidatedSeq() != seqs[15] {
			t.Errorf("cursor %d, want %d", info.GetConsolidatedSeq(), seqs[15])
		}
	})
}
