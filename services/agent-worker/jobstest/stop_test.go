package jobstest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/subagent"
)

// TestStopDuringLongToolCall: /stop ends a turn blocked in a tool call by
// cancelling the call, and the session takes its next message.
func TestStopDuringLongToolCall(t *testing.T) {
	f := newFleet(t)
	model := llmtest.NewServer(t)
	model.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		if r.LastUserText() == "build it" && !lastIsTool(r) {
			return llmtest.ToolCalls(llmtest.Call("exec", `{"command":"make -j1 world"}`))
		}
		return llmtest.Text("echo: " + r.LastUserText())
	})
	rt := &runners{execStarted: make(chan struct{}, 1), execEnded: make(chan error, 1)}
	f.startNode("w1", model, nodeConfig{slots: 2, runners: rt})
	f.send("c1", "1", "build it")
	select {
	case <-rt.execStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("exec never started")
	}
	// exec blocks until its context ends, so only a cancel ends the turn:
	// the call's context cancelled (not timed out) after /stop and the
	// "Stopped" reply prove /stop cut the running call short.
	select {
	case err := <-rt.execEnded:
		t.Fatalf("exec ended before /stop: %v", err)
	default:
	}
	f.send("c1", "2", "/stop")
	select {
	case err := <-rt.execEnded:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("exec's context ended with %v, want cancelled by /stop", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("exec still running 30s after /stop")
	}
	stopped := f.await(30*time.Second, "stopped turn", replyTo("1"))
	if !strings.Contains(stopped.msg.GetContent(), "Stopped") {
		t.Errorf("stopped reply = %q", stopped.msg.GetContent())
	}
	f.await(5*time.Second, "/stop reply", replyTo("2"))
	f.send("c1", "3", "hello again")
	if r := f.await(10*time.Second, "next reply", replyTo("3")); r.msg.GetContent() != "echo: hello again" {
		t.Errorf("next reply = %q", r.msg.GetContent())
	}
}

// TestStopReachesSubagents: /stop ends the parent's turn (blocked waiting
// for a child) and its children wherever they run; none is announced.
func TestStopReachesSubagents(t *testing.T) {
	f := newFleet(t)
	model := llmtest.NewServer(t)
	model.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		text := r.LastUserText()
		switch {
		case isChildRequest(r):
			// Past any wait of this test: a child's turn can end only
			// by being stopped.
			return llmtest.Text("child done").WithLatency(time.Hour)
		case isAnnouncement(r):
			return llmtest.Text("announced (must not happen)")
		case lastIsTool(r):
			return llmtest.Text("parent: " + llmtest.MessageText(r.LastMessage()))
		case text == "background":
			return llmtest.ToolCalls(llmtest.Call("spawn", `{"task":"long background job","label":"bg"}`))
		case text == "foreground":
			return llmtest.ToolCalls(llmtest.Call("spawn", `{"task":"long job to wait for","label":"fg","wait":true}`))
		}
		return llmtest.Text("echo: " + text)
	})
	n := f.startNode("w1", model, nodeConfig{slots: 4})
	f.startNode("w2", model, nodeConfig{slots: 4})
	f.send("c1", "1", "background")
	f.await(10*time.Second, "background spawn reply", replyTo("1"))
	f.send("c1", "2", "foreground")
	waitUntil(t, 10*time.Second, "both children running", func() bool { return count(model, isChildRequest) == 2 })

	f.send("c1", "3", "/stop")
	// The parent waits for a child that answers in an hour: its turn ends
	// "Stopped" only because /stop cancelled it.
	stopped := f.await(30*time.Second, "stopped parent turn", replyTo("2"))
	if !strings.Contains(stopped.msg.GetContent(), "Stopped") {
		t.Errorf("parent turn: %q", stopped.msg.GetContent())
	}
	// Both children's turns end (their "stopped" replies go to their own
	// subagent chats, never to the user).
	isChildStop := func(o *nanofleetv1.OutboundMessage) bool {
		return o.GetChannel() == subagent.Channel && strings.Contains(o.GetContent(), "Stopped")
	}
	f.await(30*time.Second, "first child stopped", isChildStop)
	f.await(30*time.Second, "second child stopped", func(*nanofleetv1.OutboundMessage) bool { return len(f.all(isChildStop)) == 2 })
	f.await(5*time.Second, "/stop reply", replyTo("3"))
	f.send("c1", "4", "still there?")
	if r := f.await(10*time.Second, "next reply", replyTo("4")); r.msg.GetContent() != "echo: still there?" {
		t.Errorf("next reply = %q", r.msg.GetContent())
	}
	if n := count(model, isAnnouncement); n != 0 {
		t.Errorf("%d stopped children announced", n)
	}
	if kids, err := n.subs.Children(t.Context(), "cli:c1"); err != nil || len(kids) != 0 {
		t.Errorf("children still counted as running: %v, %v", kids, err)
	}
}
