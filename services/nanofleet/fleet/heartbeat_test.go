package fleet_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// TestHeartbeatThroughTheAllInOne: the all-in-one's heartbeat takes the
// tasks of the workspace's HEARTBEAT.md, runs them at the interval the
// config sets, and tells the one chat the fleet has answered what needs
// attention; a HEARTBEAT_OK tells nobody. The parts it crosses (profile
// seeding, the schedule relay, the worker, the notifier's scan of the
// outbound stream) are wired by fleet.Start, which the heartbeat package's
// own tests do not run.
func TestHeartbeatThroughTheAllInOne(t *testing.T) {
	const task = "check the build of main"
	ws := t.TempDir()
	md := "# Heartbeat Tasks\n\n## Active Tasks\n- " + task + "\n\n## Completed\n- [x] old task\n"
	if err := os.WriteFile(filepath.Join(ws, "HEARTBEAT.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	var beats atomic.Int32
	prompts := make(chan string, 100)
	llm := llmtest.NewServer(t)
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		if !strings.HasPrefix(r.LastUserText(), "[Heartbeat") {
			return llmtest.Text("hi")
		}
		select {
		case prompts <- r.LastUserText():
		default:
		}
		if beats.Add(1) == 2 {
			return llmtest.Text("The build of main is red.")
		}
		return llmtest.Text("HEARTBEAT_OK")
	})
	tf := startFleetWith(t, llm, t.TempDir(), ws, 1, map[string]any{
		"schedule": map[string]any{"heartbeat": map[string]any{"intervalS": 1}},
	})
	if out := ask(t, tf, "hb1", "hello"); out.GetContent() != "hi" {
		t.Fatalf("reply = %v", out)
	}

	// The first beat may come before the chat was answered: its OK tells
	// nobody either way. The second's notice goes to the only chat.
	bustest.Eventually(t, 60*time.Second, func() error {
		if n := len(notices(t, tf, "hb1")); n == 0 {
			return fmt.Errorf("no notice in chat hb1 after %d beats", beats.Load())
		}
		return nil
	})
	bustest.Eventually(t, 30*time.Second, func() error {
		if n := beats.Load(); n < 4 {
			return fmt.Errorf("%d beats", n)
		}
		return nil
	})
	got := notices(t, tf, "hb1")
	if len(got) != 1 || got[0].GetContent() != "The build of main is red." || !strings.HasPrefix(got[0].GetId(), "heartbeat:") {
		t.Errorf("notices in chat hb1 = %v, want the second beat's alone", got)
	}
	prompt := bustest.Receive(t, prompts, time.Second)
	if !strings.Contains(prompt, task) || strings.Contains(prompt, "old task") {
		t.Errorf("heartbeat prompt = %q, want the active task of the workspace's HEARTBEAT.md alone", prompt)
	}
}

// notices are the messages in the outbound stream for the test client's
// chat that answer no inbound message: the heartbeat's notices.
func notices(t *testing.T, tf *testFleet, chat string) []*nanofleetv1.OutboundMessage {
	t.Helper()
	var out []*nanofleetv1.OutboundMessage
	for _, o := range storedReplies(t, tf.Bus.JS, tf.Bus.Space.OutboundStream()) {
		if o.GetChannel() == "test" && o.GetChatId() == chat && o.GetReplyTo() == "" {
			out = append(out, o)
		}
	}
	return out
}
