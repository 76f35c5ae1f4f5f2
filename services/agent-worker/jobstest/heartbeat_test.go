package jobstest

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/heartbeat"
)

// TestHeartbeatNotifiesOnlyWhenNeeded: the heartbeat runs HEARTBEAT.md's
// tasks in its own short session and tells the user's last active chat
// only when the model does not answer HEARTBEAT_OK.
func TestHeartbeatNotifiesOnlyWhenNeeded(t *testing.T) {
	f := newFleet(t)
	kv, err := f.b.KV(t.Context(), bus.BucketProfile)
	if err != nil {
		t.Fatal(err)
	}
	md := "# Heartbeat Tasks\n\n## Active Tasks\n<!-- add tasks below -->\n- check the build of main\n\n## Completed\n- [x] old task\n"
	if _, err := kv.Put(t.Context(), profile.FileKey(profile.DefaultAgent, heartbeat.File), []byte(md)); err != nil {
		t.Fatal(err)
	}
	var beats atomic.Int32
	model := llmtest.NewServer(t)
	model.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		if strings.HasPrefix(r.LastUserText(), "[Heartbeat") {
			if beats.Add(1) == 2 {
				return llmtest.Text("The build of main is red since 09:12.")
			}
			return llmtest.Text("HEARTBEAT_OK")
		}
		return llmtest.Text("hi")
	})
	cfg := heartbeat.DefaultConfig()
	cfg.Every, cfg.KeepTurns = config.Seconds(time.Second), 2
	n := f.startNode("w1", model, nodeConfig{slots: 2, heartbeat: &cfg})
	f.send("u1", "1", "hello")
	f.await(10*time.Second, "reply to the user", replyTo("1"))

	notice := f.await(15*time.Second, "heartbeat notice", func(o *nanofleetv1.OutboundMessage) bool {
		return o.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE
	})
	if notice.msg.GetChannel() != "cli" || notice.msg.GetChatId() != "u1" || !strings.Contains(notice.msg.GetContent(), "red since 09:12") {
		t.Fatalf("notice = %v", notice.msg)
	}
	waitUntil(t, 15*time.Second, "two more heartbeats", func() bool { return beats.Load() >= 5 })
	if got := f.all(toCLI("u1")); len(got) != 2 {
		t.Errorf("user chat got %d messages, want the reply and one notice: %s", len(got), f.dump())
	}
	for _, r := range model.Requests() {
		if strings.HasPrefix(r.LastUserText(), "[Heartbeat") && (!strings.Contains(r.LastUserText(), "- check the build of main") || strings.Contains(r.LastUserText(), "old task")) {
			t.Fatalf("heartbeat prompt = %q", r.LastUserText())
		}
	}
	// The heartbeat session keeps only its last turns.
	store, err := session.Open(t.Context(), f.b)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := store.LoadHistory(t.Context(), heartbeat.SessionKey(profile.DefaultAgent), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Turns) > cfg.KeepTurns+1 {
		t.Errorf("heartbeat session holds %d turns, want at most %d", len(hist.Turns), cfg.KeepTurns+1)
	}

	// Disabled: the job goes.
	cfg.Enabled = false
	off, err := heartbeat.New(t.Context(), cfg, heartbeat.Deps{Bus: f.b, Scheduler: n.sched, Profiles: profileCache(t, f)}, heartbeat.WithLogger(nopLog()))
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := n.sched.Get(t.Context(), heartbeat.SessionKey(profile.DefaultAgent), heartbeat.JobID); err == nil {
		t.Error("heartbeat job still scheduled after disabling")
	}
}
