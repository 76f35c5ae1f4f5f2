package jobstest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/subagent"
)

func isChildRequest(r *llmtest.RecordedRequest) bool {
	return strings.HasPrefix(r.LastUserText(), "[Subagent task")
}

func isAnnouncement(r *llmtest.RecordedRequest) bool {
	return strings.HasPrefix(r.LastUserText(), "[Subagent '")
}

func count(m *llmtest.Server, pred func(*llmtest.RecordedRequest) bool) int {
	n := 0
	for _, r := range m.Requests() {
		if pred(&r) {
			n++
		}
	}
	return n
}

// spawnModel is the model of a parent session and its children: a child's
// turn is answered with child, an announcement with a text saying it was
// not expected, the parent's turn after its spawn call with afterSpawn,
// and any other request with a spawn call of the arguments spawnArgs.
func spawnModel(t *testing.T, child llmtest.Reply, afterSpawn func(*llmtest.RecordedRequest) llmtest.Reply, spawnArgs func(*llmtest.RecordedRequest) string) *llmtest.Server {
	model := llmtest.NewServer(t)
	model.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		switch {
		case isChildRequest(r):
			return child
		case isAnnouncement(r):
			return llmtest.Text("unexpected announcement")
		case lastIsTool(r):
			return afterSpawn(r)
		}
		return llmtest.ToolCalls(llmtest.Call("spawn", spawnArgs(r)))
	})
	return model
}

// echoToolResult answers with the tool result the request ends with.
func echoToolResult(prefix string) func(*llmtest.RecordedRequest) llmtest.Reply {
	return func(r *llmtest.RecordedRequest) llmtest.Reply {
		return llmtest.Text(prefix + llmtest.MessageText(r.LastMessage()))
	}
}

// spawns always spawns with args.
func spawns(args string) func(*llmtest.RecordedRequest) string {
	return func(*llmtest.RecordedRequest) string { return args }
}

func toCLI(chat string) func(*nanofleetv1.OutboundMessage) bool {
	return func(o *nanofleetv1.OutboundMessage) bool { return o.GetChannel() == "cli" && o.GetChatId() == chat }
}

// TestSubagentAnnouncedOnce: a subagent started in one turn outlives its
// parent's worker, finishes on another worker, and its result reaches the
// origin chat exactly once.
func TestSubagentAnnouncedOnce(t *testing.T) {
	f := newFleet(t)
	// Worker A runs the parent turn, starts the child, and crashes while
	// running the child.
	modelA := spawnModel(t, llmtest.Text("too late").WithLatency(time.Minute), echoToolResult("On it: "),
		spawns(`{"task":"find the answer to X","label":"research"}`))
	a := f.startNode("A", modelA, nodeConfig{slots: 2})
	f.send("c1", "1", "research X in the background")
	started := f.await(10*time.Second, "parent reply", replyTo("1"))
	if !strings.Contains(started.msg.GetContent(), "Subagent [research] started") {
		t.Fatalf("parent reply = %q", started.msg.GetContent())
	}
	waitUntil(t, 10*time.Second, "child turn on A", func() bool { return count(modelA, isChildRequest) > 0 })
	a.kill()

	modelB := llmtest.NewServer(t)
	modelB.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		switch {
		case isChildRequest(r):
			return llmtest.Text("X is 42.")
		case isAnnouncement(r):
			return llmtest.Text("Found it: X is 42.")
		}
		return llmtest.Text("?")
	})
	f.startNode("B", modelB, nodeConfig{slots: 2, runners: &runners{}})
	ann := f.await(15*time.Second, "announcement in the origin chat", func(o *nanofleetv1.OutboundMessage) bool {
		return toCLI("c1")(o) && o.GetContent() == "Found it: X is 42."
	})
	if !strings.HasPrefix(ann.msg.GetReplyTo(), "subagent:") || ann.msg.GetSessionKey() != "cli:c1" {
		t.Errorf("announcement reply_to %q session %q", ann.msg.GetReplyTo(), ann.msg.GetSessionKey())
	}
	// Nothing more arrives in the origin chat.
	f.send("c1", "2", "anything else?")
	f.await(10*time.Second, "reply to the next message", replyTo("2"))
	if got := f.all(toCLI("c1")); len(got) != 3 {
		t.Errorf("origin chat got %d replies, want 3: %s", len(got), f.dump())
	}
	if n := count(modelB, isChildRequest); n != 1 {
		t.Errorf("child ran %d times on B", n)
	}
	if n := count(modelB, isAnnouncement); n != 1 {
		t.Errorf("parent got %d announcements", n)
	}
	// The child had the reduced tool set.
	for _, r := range modelB.Requests() {
		if isChildRequest(&r) {
			if names := r.ToolNames(); !slices.Equal(names, []string{"exec", "read_file"}) {
				t.Errorf("child's tools = %v, want exec and read_file only", names)
			}
		}
	}
	// The announcement carried the task and the result.
	for _, r := range modelB.Requests() {
		if isAnnouncement(&r) && (!strings.Contains(r.LastUserText(), "find the answer to X") || !strings.Contains(r.LastUserText(), "X is 42.")) {
			t.Errorf("announcement = %q", r.LastUserText())
		}
	}
}

// TestSubagentWait: with wait the child's result is the spawn call's
// result, in the same turn, and nothing is announced.
func TestSubagentWait(t *testing.T) {
	f := newFleet(t)
	model := spawnModel(t, llmtest.Text("child result: 7"),
		func(*llmtest.RecordedRequest) llmtest.Reply { return llmtest.Text("The answer is 7.") },
		spawns(`{"task":"compute it","label":"calc","wait":true}`))
	n := f.startNode("w1", model, nodeConfig{slots: 2})
	f.send("c1", "1", "compute it and tell me")
	got := f.await(15*time.Second, "reply", replyTo("1"))
	if got.msg.GetContent() != "The answer is 7." {
		t.Fatalf("reply = %q", got.msg.GetContent())
	}
	last, _ := model.LastRequest()
	for _, r := range model.Requests() {
		if lastIsTool(&r) {
			last = r
		}
	}
	if res := toolResults(last); len(res) != 1 || !strings.Contains(res[0], "child result: 7") {
		t.Errorf("spawn result = %q", res)
	}
	f.send("c1", "2", "thanks")
	f.await(10*time.Second, "next reply", replyTo("2"))
	if replies := f.all(toCLI("c1")); len(replies) != 2 {
		t.Errorf("origin chat got %d replies: %s", len(replies), f.dump())
	}
	if kids, err := n.subs.Children(t.Context(), "cli:c1"); err != nil || len(kids) != 0 {
		t.Errorf("children left: %v, %v", kids, err)
	}
}

// TestSubagentLimit: a session runs at most MaxPerSession children.
func TestSubagentLimit(t *testing.T) {
	f := newFleet(t)
	model := spawnModel(t, llmtest.Text("slow").WithLatency(time.Minute), echoToolResult(""),
		func(r *llmtest.RecordedRequest) string { return `{"task":"` + r.LastUserText() + `"}` })
	cfg := subagent.DefaultConfig()
	cfg.MaxPerSession = 1
	f.startNode("w1", model, nodeConfig{slots: 3, subagents: &cfg})
	f.send("c1", "1", "first task")
	if r := f.await(10*time.Second, "first", replyTo("1")); !strings.Contains(r.msg.GetContent(), "started") {
		t.Fatalf("first spawn = %q", r.msg.GetContent())
	}
	f.send("c1", "2", "second task")
	if r := f.await(10*time.Second, "second", replyTo("2")); !strings.Contains(r.msg.GetContent(), "limit") {
		t.Fatalf("second spawn = %q", r.msg.GetContent())
	}
	// Another session has its own budget.
	f.send("c2", "3", "other task")
	if r := f.await(10*time.Second, "other", replyTo("3")); !strings.Contains(r.msg.GetContent(), "started") {
		t.Fatalf("other session's spawn = %q", r.msg.GetContent())
	}
}
