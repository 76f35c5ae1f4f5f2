package fleet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

func ask(t *testing.T, tf *testFleet, chat, text string) *nanofleetv1.OutboundMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	replies, err := tf.client.Ask(ctx, fleet.Request{ChatID: chat, Text: text})
	if err != nil {
		t.Fatalf("ask %q: %v", text, err)
	}
	if len(replies) != 1 {
		t.Fatalf("ask %q: %d replies, want 1: %v", text, len(replies), replies)
	}
	return replies[0]
}

// TestToolTurnThroughTheRunner: the model writes a file then reads it back
// through the tool runner; one final reply; the next turn sees the history.
func TestToolTurnThroughTheRunner(t *testing.T) {
	llm := llmtest.NewServer(t)
	tf := startFleet(t, llm, t.TempDir(), 1)
	llm.Enqueue(
		llmtest.ToolCalls(llmtest.Call("write_file", `{"path":"notes/hello.txt","content":"hello from the model"}`)),
		llmtest.ToolCalls(llmtest.Call("read_file", `{"path":"notes/hello.txt"}`)),
		llmtest.Text("The file says hello."),
		llmtest.Text("You asked me to write a file."),
	)
	out := ask(t, tf, "c1", "write and read a file")
	if out.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL || out.GetContent() != "The file says hello." {
		t.Fatalf("reply = %v", out)
	}
	data, err := os.ReadFile(filepath.Join(tf.ws, "notes", "hello.txt"))
	if err != nil || string(data) != "hello from the model" {
		t.Fatalf("file in workspace = %q, %v", data, err)
	}
	reqs := llm.Requests()
	if got := reqs[2].LastMessage(); got.Role != "tool" || !strings.Contains(got.Content, "hello from the model") {
		t.Errorf("read_file result given to the model = %+v", got)
	}

	ask(t, tf, "c1", "what did I ask?")
	last, _ := llm.LastRequest()
	var sawFirstTurn bool
	for _, m := range last.Messages {
		if m.Role == "user" && m.Content == "write and read a file" {
			sawFirstTurn = true
		}
	}
	if !sawFirstTurn {
		t.Error("second turn did not see the first turn's history")
	}
	s, err := session.Open(t.Context(), tf.Bus)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := s.LoadHistory(t.Context(), "test:c1", 0)
	if err != nil || len(hist.Turns) != 2 {
		t.Fatalf("history: %d turns, %v", len(hist.Turns), err)
	}
	if n := len(hist.Turns[0].Record.GetMessages()); n != 6 {
		t.Errorf("first turn recorded %d messages, want 6 (user, 2×(call, result), answer)", n)
	}
}

// TestInvalidToolArgumentsReachTheModel: a tool call with bad arguments
// is answered with the validation error, and the turn goes on.
func TestInvalidToolArgumentsReachTheModel(t *testing.T) {
	llm := llmtest.NewServer(t)
	tf := startFleet(t, llm, t.TempDir(), 1)
	llm.Enqueue(
		llmtest.ToolCalls(llmtest.Call("read_file", `{"offset":"not a number"}`)),
		llmtest.Text("I will fix my arguments."),
	)
	out := ask(t, tf, "c1", "read something")
	if out.GetContent() != "I will fix my arguments." {
		t.Fatalf("reply = %v", out)
	}
	toolMsg := llm.Requests()[1].LastMessage()
	if toolMsg.Role != "tool" || !strings.Contains(toolMsg.Content, "path") {
		t.Fatalf("model was not told about the missing path: %+v", toolMsg)
	}
}

// TestStatusSeesEveryService: the all-in-one's services announce
// themselves to discovery, as `nanofleet status` and the dashboard count
// them.
func TestStatusSeesEveryService(t *testing.T) {
	llm := llmtest.NewServer(t)
	tf := startFleet(t, llm, t.TempDir(), 2)
	ask(t, tf, "s1", "hello") // workers register when they run
	st, err := fleet.GetStatus(t.Context(), tf.Bus, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, s := range st.Services {
		counts[s.Name]++
	}
	want := map[string]int{"agent-worker": 2, "tool-runner": 1, "memory-consolidator": 1}
	for name, n := range want {
		if counts[name] != n {
			t.Errorf("%s online = %d, want %d (all: %v)", name, counts[name], n, counts)
		}
	}
	var inbound bool
	for _, s := range st.Streams {
		inbound = inbound || s.Name == "NANOFLEET_IN"
	}
	if !inbound {
		t.Errorf("streams = %+v", st.Streams)
	}
}

// TestConsolidatorOnItsOwnConnection: the all-in-one's consolidator talks
// to the server on a connection of its own, as it does in its own
// process; on the workers' connection its requests queued behind their
// turns' and it fell behind them (docs/bench/issue18-turns). A
// consolidation through it moves the session's cursor.
func TestConsolidatorOnItsOwnConnection(t *testing.T) {
	llm := llmtest.NewServer(t)
	answer := strings.Repeat("A long answer that fills the context budget. ", 40)
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		for _, tool := range r.Tools {
			if tool.Function != nil && tool.Function.Name == "save_memory" {
				return llmtest.ToolCalls(llmtest.Call("save_memory", `{"history_entry":"[2026-01-01 00:00] Long answers.","memory_update":""}`))
			}
		}
		return llmtest.Text(answer)
	})
	// About 500 tokens a turn against a share of 384: the second turn
	// asks for the first to be consolidated.
	tf := startFleetWith(t, llm, t.TempDir(), t.TempDir(), 1, map[string]any{
		"agents": map[string]any{"defaults": map[string]any{"model": "fake-model", "contextWindowTokens": 1024, "maxTokens": 256}},
	})

	conns, err := tf.Embedded.NATSServer().Connz(&server.ConnzOptions{Limit: 1024})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, c := range conns.Conns {
		names[c.Name]++
	}
	if names["nanofleet-memory-consolidator"] != 1 || names["nanofleet"] != 1 {
		t.Errorf("connections by name %v, want one nanofleet and one nanofleet-memory-consolidator", names)
	}

	const chat = "long"
	for _, text := range []string{"one", "two", "three"} {
		ask(t, tf, chat, text)
	}
	sessions, err := session.Open(t.Context(), tf.Bus)
	if err != nil {
		t.Fatal(err)
	}
	key := session.Key("test", chat)
	bustest.Eventually(t, 30*time.Second, func() error {
		info, _, err := sessions.Info(t.Context(), key)
		if err != nil {
			return err
		}
		if info.GetConsolidatedSeq() == 0 {
			return fmt.Errorf("session %s not consolidated yet", key)
		}
		return nil
	})
}
