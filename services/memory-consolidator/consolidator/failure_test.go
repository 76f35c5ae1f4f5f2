package consolidator_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/consolidator"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/memtest"
)

func TestModelFailureArchivesRawTurns(t *testing.T) {
	f := startFleetWith(t, memory.KindAgent, 4000, func(*llmtest.RecordedRequest) llmtest.Reply {
		return llmtest.Fail(503, "")
	})
	ctx := t.Context()
	f.say(t, "cli", "x", "ada", "1", "FACT: my passport number is X123.")
	f.say(t, "cli", "x", "ada", "2", "/new")
	turns, err := memory.ReadTurns(ctx, f.b, "cli:x", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	memtest.WaitCursor(t, f.b, "cli:x", turns[0].Seq, 15*time.Second)
	entries := memtest.Coverage(t, f.b, "cli:x")
	if len(entries) != 1 || !entries[0].GetRaw() || !strings.Contains(entries[0].GetText(), "USER: FACT: my passport number is X123.") ||
		!strings.Contains(entries[0].GetText(), "ASSISTANT: ok, noted.") {
		t.Fatalf("entries after a model failure:\n%s", memtest.Describe(entries))
	}
	// The session goes on, and the archived turn is still within reach.
	if o := f.say(t, "cli", "x", "ada", "3", "hello again"); o.GetContent() != "ok, noted." {
		t.Fatalf("reply after failed consolidation = %v", o)
	}
	req := turnRequest(t, f.llm, "hello again")
	if !strings.Contains(req.Messages[0].Content, "X123") {
		t.Errorf("the raw entry is not in the prompt's recent history:\n%s", req.Messages[0].Content)
	}
	hits, err := f.mem.Search(ctx, &nanofleetv1.InboundMessage{Channel: "cli", SenderId: "ada"}, "cli:x", "passport", 5)
	if err != nil || len(hits) != 1 {
		t.Errorf("memory_search passport = %v, %v", hits, err)
	}
}

func TestModelAnswers(t *testing.T) {
	tests := []struct {
		name    string
		answer  string
		call    bool // answer is save_memory's arguments, not text
		raw     bool
		entry   string
		memory  string
		wantErr bool
	}{
		{"save_memory call", `{"history_entry": "[2026-01-01 10:00] Ada likes tea.", "memory_update": "- Ada likes tea"}`, true, false, "Ada likes tea.", "- Ada likes tea", false},
		{"save_memory call without memory keeps memory", `{"history_entry": "Ada likes tea."}`, true, false, "Ada likes tea.", "", false},
		{"save_memory call without entry", `{"memory_update": "- x"}`, true, true, "USER: I like tea", "", false},
		{"save_memory call with wrong types", `{"history_entry": {"text": "Ada"}, "memory_update": "- x"}`, true, true, "USER: I like tea", "", false},
		{"valid text", `{"history_entry": "[2026-01-01 10:00] Ada likes tea.", "memory_update": "- Ada likes tea"}`, false, false, "Ada likes tea.", "- Ada likes tea", false},
		{"fenced with trailing comma", "```json\n{\"history_entry\": \"[2026-01-01 10:00] Ada likes tea.\", \"memory_update\": \"- Ada likes tea\",}\n```", false, false, "Ada likes tea.", "- Ada likes tea", false},
		{"raw newlines", "{\"history_entry\": \"Ada likes\ntea.\", \"memory_update\": \"- Ada\n- tea\"}", false, false, "Ada likes\ntea.", "- Ada\n- tea", false},
		{"no memory update keeps memory", `{"history_entry": "Ada likes tea."}`, false, false, "Ada likes tea.", "", false},
		{"prose", "I am sorry, I cannot help with that.", false, true, "USER: I like tea", "", false},
		{"no entry", `{"memory_update": "- x"}`, false, true, "USER: I like tea", "", false},
	}
	_, b := memtest.Start(t)
	srv := llmtest.NewServer(t)
	runConsolidator(t, b, srv, memtest.Logger(t), nil)
	ctx := t.Context()
	sessions, _ := session.Open(ctx, b)
	docs, _ := memory.OpenDocs(ctx, b)
	for i, tt := range tests {
		key := fmt.Sprint("cli:", i)
		scope := memory.SessionScope("default", key)
		seq, err := sessions.Append(ctx, key, &nanofleetv1.TurnRecord{TurnId: key, Messages: []*nanofleetv1.ChatMessage{{Role: "user", Content: "I like tea"}}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if tt.call {
			srv.Enqueue(llmtest.ToolCalls(llmtest.Call("save_memory", tt.answer)))
		} else {
			srv.Enqueue(llmtest.Text(tt.answer))
		}
		if err := memory.PublishRequest(ctx, b, &nanofleetv1.ConsolidationRequest{SessionKey: key, FromSeq: 1, ToSeq: seq, Scope: scope.Key(), Reason: "budget"}); err != nil {
			t.Fatal(err)
		}
		memtest.WaitCursor(t, b, key, seq, 10*time.Second)
		entries := memtest.Coverage(t, b, key)
		if len(entries) != 1 || entries[0].GetRaw() != tt.raw || !strings.Contains(entries[0].GetText(), tt.entry) {
			t.Errorf("%s: entries\n%s", tt.name, memtest.Describe(entries))
		}
		doc, _, _ := docs.Get(ctx, scope)
		if doc.GetContent() != tt.memory {
			t.Errorf("%s: memory %q, want %q", tt.name, doc.GetContent(), tt.memory)
		}
	}
	// Every consolidation forced the save_memory tool.
	for _, req := range srv.Requests() {
		choice, _ := json.Marshal(req.ToolChoice)
		if string(choice) != `{"function":{"name":"save_memory"},"type":"function"}` || len(req.Tools) != 1 {
			t.Errorf("consolidation request %d: tool_choice %s with %d tools, want save_memory forced", req.Seq, choice, len(req.Tools))
		}
	}
}

func TestBadRequestsAreDeadLettered(t *testing.T) {
	_, b := memtest.Start(t)
	srv := llmtest.NewServer(t)
	letters := memtest.Messages(t, b, b.Space.DeadLetterStream(), b.Space.DeadLetter(consolidator.DeadLetterSource))
	runConsolidator(t, b, srv, memtest.Logger(t), func(cfg *consolidator.Config) { cfg.MaxRequestBytes = 512 })

	agent := memory.AgentScope("default").Key()
	encode := func(r *nanofleetv1.ConsolidationRequest) []byte { d, _ := proto.Marshal(r); return d }
	tests := []struct {
		name    string
		subject string
		data    []byte
		reason  string
	}{
		{"oversized", b.Space.Consolidate("cli:1"), encode(&nanofleetv1.ConsolidationRequest{SessionKey: "cli:1", FromSeq: 1, ToSeq: 2, Scope: agent, Reason: strings.Repeat("x", 600)}), "exceeds the maximum of 512"},
		{"not protobuf", b.Space.Consolidate("cli:2"), []byte{0xff, 0xff, 0xff}, "malformed ConsolidationRequest"},
		{"no session", b.Space.Consolidate("cli:3"), encode(&nanofleetv1.ConsolidationRequest{FromSeq: 1, ToSeq: 2, Scope: agent}), "no session_key"},
		{"empty range", b.Space.Consolidate("cli:4"), encode(&nanofleetv1.ConsolidationRequest{SessionKey: "cli:4", FromSeq: 5, ToSeq: 3, Scope: agent}), "range 5-3 is empty"},
		{"wrong subject", b.Space.Consolidate("cli:5"), encode(&nanofleetv1.ConsolidationRequest{SessionKey: "cli:other", FromSeq: 1, ToSeq: 2, Scope: agent}), "does not belong on subject"},
		{"bad scope", b.Space.Consolidate("cli:6"), encode(&nanofleetv1.ConsolidationRequest{SessionKey: "cli:6", FromSeq: 1, ToSeq: 2, Scope: "galaxy.x.y"}), "scope"},
	}
	for _, tt := range tests {
		bustest.Publish(t, b, tt.subject, tt.data)
		m := memtest.Next(t, letters, 10*time.Second, "dead letter for "+tt.name)
		if got := m.Headers().Get("Nanofleet-Reason"); !strings.Contains(got, tt.reason) {
			t.Errorf("%s: reason %q, want %q", tt.name, got, tt.reason)
		}
		dl := &nanofleetv1.DeadLetter{}
		if err := proto.Unmarshal(m.Data(), dl); err != nil || string(dl.GetData()) != string(tt.data) || dl.GetSubject() != tt.subject {
			t.Errorf("%s: dead letter %v, %v", tt.name, dl, err)
		}
	}
	// None of them stays in the queue (terminated right after the dead
	// letter is stored; the server removes them as it gets the Term).
	waitQueueEmpty(t, b, 5*time.Second)
}

// waitQueueEmpty waits until the consolidation requests' work queue holds
// none: each was acknowledged or terminated.
func waitQueueEmpty(t *testing.T, b *bus.Bus, within time.Duration) {
	t.Helper()
	st, err := b.JS.Stream(t.Context(), b.Space.MemoryStream())
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, within, func() error {
		info, err := st.Info(t.Context())
		if err != nil {
			return err
		}
		if n := info.State.Msgs; n != 0 {
			return fmt.Errorf("%d requests left in the queue", n)
		}
		return nil
	})
}

// runConsolidator starts consolidator "c" on b with the model srv, its
// config changed by set (if not nil), and runs it until the test ends.
func runConsolidator(t *testing.T, b *bus.Bus, srv *llmtest.Server, log *slog.Logger, set func(*consolidator.Config)) {
	t.Helper()
	cfg := consolidator.DefaultConfig()
	cfg.ID = "c"
	if set != nil {
		set(&cfg)
	}
	c, err := consolidator.New(t.Context(), cfg, consolidator.Deps{Bus: b, Model: memtest.Model(t, srv)}, consolidator.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	svctest.Run(t, c.Run)
}
