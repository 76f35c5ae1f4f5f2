package consolidator

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
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

// appendTurns commits n turns "R001: … FACT: fact 1 of <key>." … to the
// session: no two sessions have a fact in common, so every consolidation
// really changes a memory document they share.
func appendTurns(t testing.TB, b *bus.Bus, key string, n int) []uint64 {
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
			{Role: "user", Content: fmt.Sprintf("R%03d: hello. FACT: fact %d of %s.", i, i, key)},
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
	return newConsolidatorWith(t, b, id, srv, func(*Config) {})
}

// newConsolidatorWith is newConsolidator with set changing the config.
func newConsolidatorWith(t testing.TB, b *bus.Bus, id string, srv *llmtest.Server, set func(*Config)) *Consolidator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ID = id
	cfg.ChunkTokens = 100 // a few turns per entry
	set(&cfg)
	c, err := New(t.Context(), cfg, Deps{Bus: b, Model: memtest.Model(t, srv)}, WithLogger(memtest.Logger(t).With("c", id)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// holdNothing is a holder that holds no document.
func holdNothing(ctx context.Context, _ memory.Scope, _ *slog.Logger) (context.Context, func(), error) {
	return ctx, func() {}, nil
}

// checkExactlyOnce asserts every turn is in exactly one entry and every
// entry was applied to memory once.
func checkExactlyOnce(t testing.TB, b *bus.Bus, key string, n int) {
	t.Helper()
	checkExactlyOnceIn(t, b, memory.AgentScope("default"), key, n)
}

// checkExactlyOnceIn is checkExactlyOnce for a session of scope.
func checkExactlyOnceIn(t testing.TB, b *bus.Bus, scope memory.Scope, key string, n int) {
	t.Helper()
	entries := memtest.Coverage(t, b, key)
	for i := 1; i <= n; i++ {
		if c := memtest.Count(entries, fmt.Sprintf("R%03d:", i)); c != 1 {
			t.Errorf("turn %d of %s is in %d entries, want 1:\n%s", i, key, c, memtest.Describe(entries))
		}
	}
	docs, _ := memory.OpenDocs(t.Context(), b)
	doc, _, _ := docs.Get(t.Context(), scope)
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

	t.Run("without the leases", func(t *testing.T) {
		// The conditional writes alone keep the entries exactly once, as
		// when a session's or document's lease expires under a slow
		// consolidator: rounds runs without the one and holds nothing for
		// the other.
		const key = "cli:cas"
		seqs := appendTurns(t, b1, key, 16)
		req := &nanofleetv1.ConsolidationRequest{SessionKey: key, FromSeq: 1, ToSeq: seqs[15], Reason: "new", Scope: memory.AgentScope("default").Key()}
		var wg sync.WaitGroup
		for i := range 6 {
			c := []*Consolidator{c1, c2}[i%2]
			wg.Go(func() {
				if _, err := c.rounds(t.Context(), req, memory.AgentScope("default"), holdNothing, nil, c.log); err != nil {
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

// sharedRow is a run of sessions consolidated into one MEMORY.md.
type sharedRow struct {
	name            string
	consolidators   int
	slots           int
	sessions, turns int
	latency         time.Duration
}

// sharedRun is what a sharedRow measured.
type sharedRun struct {
	calls, entries int
	took           time.Duration
}

// shareDocument runs row: every session's turns are consolidated into the
// agent's MEMORY.md by the model memtest.Consolidate, which rewrites it
// every call. It checks that every entry is logged and applied exactly
// once, none raw, that MEMORY.md holds every fact, and that every model
// call was shown the document as the call before left it (no lost
// update).
func shareDocument(t testing.TB, row sharedRow, within time.Duration) sharedRun {
	t.Helper()
	srv, b := memtest.Start(t)
	model := llmtest.NewServer(t, llmtest.WithLatency(row.latency))
	chain := memtest.NewChain(memtest.Consolidate)
	model.Handle(chain.Script)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i := range row.consolidators {
		cb := b
		if i > 0 {
			cb = srv.Connect(t, "")
		}
		c := newConsolidatorWith(t, cb, fmt.Sprint("c", i+1), model, func(cfg *Config) {
			cfg.Slots = row.slots
			cfg.RecentEntries = row.sessions * row.turns // every applied entry stays countable
		})
		wg.Go(func() { _ = c.Run(ctx) })
	}
	keys := make([]string, row.sessions)
	last := make([]uint64, row.sessions)
	for i := range keys {
		keys[i] = fmt.Sprintf("cli:shared%d", i)
		seqs := appendTurns(t, b, keys[i], row.turns)
		last[i] = seqs[len(seqs)-1]
	}
	start := time.Now()
	for i, key := range keys {
		req := &nanofleetv1.ConsolidationRequest{SessionKey: key, FromSeq: 1, ToSeq: last[i], Reason: "budget", Scope: memory.AgentScope("default").Key()}
		if err := memory.PublishRequest(t.Context(), b, req); err != nil {
			t.Fatal(err)
		}
	}
	for i, key := range keys {
		memtest.WaitCursor(t, b, key, last[i], within)
	}
	run := sharedRun{took: time.Since(start)}
	for _, key := range keys {
		checkExactlyOnce(t, b, key, row.turns)
		for _, e := range memtest.Coverage(t, b, key) {
			if e.GetRaw() {
				t.Errorf("%s: entry %d is raw; the model was to answer every call", key, e.Seq)
			}
			run.entries++
		}
	}
	content := memoryOf(t, b)
	for _, key := range keys {
		for i := 1; i <= row.turns; i++ {
			if fact := fmt.Sprintf("- fact %d of %s", i, key); !strings.Contains(content, fact) {
				t.Errorf("MEMORY.md lost %q:\n%s", fact, content)
			}
		}
	}
	for _, br := range chain.Breaks() {
		t.Errorf("lost update: %s", br)
	}
	run.calls = int(model.RequestCount())
	return run
}

// TestSharedDocumentTakesTurns: consolidations of many sessions into one
// MEMORY.md take turns on it, so that each model call is made against the
// document it updates (never a merge after a lost compare-and-set), and
// every entry is applied once. The rounds of one consolidator waiting for
// the document join one batch: fewer model calls than entries.
func TestSharedDocumentTakesTurns(t *testing.T) {
	tests := []struct {
		sharedRow
		batches bool // some model call must consolidate several entries
	}{
		{sharedRow{"one consolidator, four slots", 1, 4, 8, 6, 20 * time.Millisecond}, true},
		{sharedRow{"one consolidator, eight slots", 1, 8, 8, 6, 20 * time.Millisecond}, true},
		{sharedRow{"two consolidators, four slots each", 2, 4, 8, 6, 20 * time.Millisecond}, false},
		// The document lease is renewed while the model works (the test
		// layout's lease TTL is 3 s), so the other waits instead of taking
		// it over and then losing the compare-and-set.
		{sharedRow{"model slower than the lease TTL", 2, 1, 2, 2, 4 * time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := shareDocument(t, tt.sharedRow, 30*time.Second)
			t.Logf("%d model calls for %d entries (%.2f per consolidation) in %s", run.calls, run.entries, float64(run.calls)/float64(run.entries), run.took.Round(time.Millisecond))
			if run.calls > run.entries {
				t.Errorf("%d model calls for %d entries, want at most one each (no merge after a lost race)", run.calls, run.entries)
			}
			if tt.batches && run.calls >= run.entries {
				t.Errorf("%d model calls for %d entries, want fewer: waiting rounds join a batch", run.calls, run.entries)
			}
		})
	}
}

// BenchmarkSharedDocument measures one consolidator (four slots) bringing
// many sessions' turns into one MEMORY.md: model calls per entry and the
// time until every cursor is at the end.
func BenchmarkSharedDocument(b *testing.B) {
	for _, latency := range []time.Duration{20 * time.Millisecond, 200 * time.Millisecond} {
		for _, sessions := range []int{8, 32} {
			b.Run(fmt.Sprintf("model=%s/sessions=%d", latency, sessions), func(b *testing.B) {
				var calls, entries int
				var took time.Duration
				for b.Loop() {
					run := shareDocument(b, sharedRow{"", 1, 4, sessions, 6, latency}, 5*time.Minute)
					calls, entries, took = calls+run.calls, entries+run.entries, took+run.took
				}
				b.ReportMetric(float64(calls)/float64(entries), "calls/entry")
				b.ReportMetric(float64(entries)/float64(b.N), "entries")
				b.ReportMetric(took.Seconds()/float64(b.N), "s/all")
			})
		}
	}
}
