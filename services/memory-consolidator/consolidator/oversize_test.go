package consolidator

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/syncbuf"
	"github.com/nanofleet/nanofleet/pkg/textcut"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/memtest"
)

// limitMemory gives the memory bucket a max value size, so that a test
// reaches the bucket's limit with less than the server's max payload.
func limitMemory(t *testing.T, b *bus.Bus, max int32) {
	t.Helper()
	kv, err := b.KV(t.Context(), bus.BucketMemory)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.Config()
	cfg.MaxValueSize = max
	if _, err := b.JS.UpdateKeyValue(t.Context(), cfg); err != nil {
		t.Fatalf("limit the memory bucket: %v", err)
	}
}

// limitLog gives the history log stream a smaller max message size.
func limitLog(t *testing.T, b *bus.Bus, max int32) {
	t.Helper()
	st, err := b.JS.Stream(t.Context(), memory.NamesOf(b.Space).LogStream())
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxMsgSize = max
	if _, err := b.JS.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatalf("limit the history log: %v", err)
	}
}

// seedMemory writes the agent's MEMORY.md.
func seedMemory(t *testing.T, b *bus.Bus, content string) {
	t.Helper()
	docs, err := memory.OpenDocs(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := docs.SetContent(t.Context(), memory.AgentScope("default"), content, "test"); err != nil {
		t.Fatal(err)
	}
}

// logUnapplied commits two turns of cli:a and logs their history entry
// without applying it to memory, as a consolidator stopped between the
// two leaves them; it returns the turns' seqs.
func logUnapplied(t *testing.T, b *bus.Bus) []uint64 {
	t.Helper()
	seqs := appendTurns(t, b, "cli:a", 2)
	e := &nanofleetv1.HistoryEntry{
		SessionKey: "cli:a", Scope: memory.AgentScope("default").Key(), FromSeq: 1, ToSeq: seqs[1],
		Text: "[2026-01-01 00:00] R001: and R002: said.", Reason: "budget", CreatedAt: timestamppb.Now(),
	}
	if _, err := memory.OpenLog(b).Append(t.Context(), e, 0); err != nil {
		t.Fatal(err)
	}
	return seqs
}

// savedAs is the model calling save_memory with entry and update.
func savedAs(entry, update string) llmtest.Reply {
	args, _ := json.Marshal(map[string]string{"history_entry": entry, "memory_update": update})
	return llmtest.ToolCalls(llmtest.Call("save_memory", string(args)))
}

// TestOversizedAnswer: a model answer larger than the bus accepts (a
// memory_update above the server's max payload or the memory bucket's max
// value size, a history_entry above the log stream's max message size) is
// unusable like any other: the turns are archived raw, memory stays as it
// was, the cursor moves, and the model is asked once. A document the bus
// refuses even with memory kept is a request that can never succeed: it is
// dead-lettered after that one call, never retried.
func TestOversizedAnswer(t *testing.T) {
	const seed = "- Ada likes tea"
	tests := []struct {
		name       string
		valueMax   int32  // the memory bucket's max value size; 0: none of its own
		logMax     int32  // the history log's max message size; 0: the layout's
		seed       string // MEMORY.md before
		answer     llmtest.Reply
		deadLetter bool
		log        string // in the log line that says why
	}{
		{"memory update over the server's max payload", 0, 0, seed,
			savedAs("[2026-01-01 00:00] Ada talked.", strings.Repeat("- a fact\n", 9<<20/9)), false, "memory of agent default is"},
		{"memory update over the bucket's max value size", 64 << 10, 0, seed,
			savedAs("[2026-01-01 00:00] Ada talked.", strings.Repeat("- a fact\n", 100<<10/9)), false, "memory of agent default is"},
		{"text answer with a memory update over the bucket's max value size", 64 << 10, 0, seed,
			llmtest.Text(`{"history_entry": "[2026-01-01 00:00] Ada talked.", "memory_update": "` + strings.Repeat("- a fact. ", 100<<10/10) + `"}`), false, "memory of agent default is"},
		{"history entry over the log's max message size", 0, 64 << 10, seed,
			savedAs(strings.Repeat("Ada talked. ", 100<<10/12), seed), false, "history entry of cli:a is"},
		// Room for the write's headers, not for a recent entry more.
		{"memory at the bucket's limit before", 64 << 10, 0, strings.Repeat("m", 64<<10-150),
			savedAs("[2026-01-01 00:00] Ada talked.", ""), true, "cannot be stored"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, b := memtest.Start(t)
			if tt.valueMax > 0 {
				limitMemory(t, b, tt.valueMax)
			}
			if tt.logMax > 0 {
				limitLog(t, b, tt.logMax)
			}
			seedMemory(t, b, tt.seed)
			model := llmtest.NewServer(t)
			// Every call gets the same answer: a retry would ask again.
			model.Handle(func(*llmtest.RecordedRequest) llmtest.Reply { return tt.answer })
			var logs syncbuf.Buffer
			cfg := DefaultConfig()
			cfg.ID = "c1"
			c, err := New(t.Context(), cfg, Deps{Bus: b, Model: memtest.Model(t, model)}, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if t.Failed() {
					t.Logf("consolidator's log:\n%s", logs.String())
				}
			}()
			letters := memtest.Messages(t, b, b.Space.DeadLetterStream(), b.Space.DeadLetter(DeadLetterSource))
			runConsolidator(t, c)
			last := publishRounds(t, b, memory.AgentScope("default"), []string{"cli:a"}, 2)

			if tt.deadLetter {
				m := memtest.Next(t, letters, 20*time.Second, "dead letter")
				if reason := m.Headers().Get("Nanofleet-Reason"); !strings.Contains(reason, tt.log) {
					t.Errorf("dead letter's reason %q, want %q", reason, tt.log)
				}
				sessions, err := session.Open(t.Context(), b)
				if err != nil {
					t.Fatal(err)
				}
				if info, _, err := sessions.Info(t.Context(), "cli:a"); err != nil || info.GetConsolidatedSeq() != 0 {
					t.Errorf("cursor %d, %v; want 0 (the turns stay unconsolidated)", info.GetConsolidatedSeq(), err)
				}
			} else {
				// 9 MiB answers take seconds to encode and decode (tens
				// under the race detector); the wait ends when the cursor
				// moves.
				memtest.WaitCursor(t, b, "cli:a", last[0], time.Minute)
				checkExactlyOnce(t, b, "cli:a", 2)
				if e := memtest.Coverage(t, b, "cli:a"); len(e) != 1 || !e[0].GetRaw() || !strings.Contains(e[0].GetText(), "FACT: fact 1 of cli:a") {
					t.Errorf("want the turns archived raw in one entry:\n%s", memtest.Describe(e))
				}
				if l := logs.String(); !strings.Contains(l, tt.log) || !strings.Contains(l, "bytes the bus accepts") {
					t.Errorf("no log line naming the size and the limit (%q)", tt.log)
				}
			}
			if got := memoryOf(t, b); got != tt.seed {
				t.Errorf("memory changed to %d bytes starting %q", len(got), textcut.Clip(got, 40))
			}
			if n := model.RequestCount(); n != 1 {
				t.Errorf("%d model calls, want 1", n)
			}
		})
	}
}

// TestOversizedMergeKeepsMemory: an entry logged but not applied (the
// consolidator stopped between the two) is finished by merging its turns
// into memory; a merged memory the bus refuses leaves memory as it was and
// the entry applied, with one model call and no error to retry.
func TestOversizedMergeKeepsMemory(t *testing.T) {
	const seed = "- Ada likes tea"
	_, b := memtest.Start(t)
	limitMemory(t, b, 64<<10)
	seedMemory(t, b, seed)
	seqs := logUnapplied(t, b)
	model := llmtest.NewServer(t)
	model.Handle(func(*llmtest.RecordedRequest) llmtest.Reply {
		return savedAs("[2026-01-01 00:00] Ada talked.", strings.Repeat("- a fact\n", 100<<10/9))
	})
	c := newConsolidator(t, b, "c1", model)
	if err := bustest.Receive(t, startRound(t.Context(), c, "cli:a", seqs[1]), 20*time.Second); err != nil {
		t.Fatalf("round: %v", err)
	}
	memtest.WaitCursor(t, b, "cli:a", seqs[1], 10*time.Second)
	checkExactlyOnce(t, b, "cli:a", 2)
	if got := memoryOf(t, b); got != seed {
		t.Errorf("memory changed to %d bytes starting %q", len(got), textcut.Clip(got, 40))
	}
	if n := model.RequestCount(); n != 1 {
		t.Errorf("%d model calls, want 1", n)
	}
}
