package fleet_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/schedule"
)

// TestCronJobThroughTheAllInOne: the model schedules a job with the cron
// tool; its fires come back as turns in the same chat; the operator sees
// and removes it.
func TestCronJobThroughTheAllInOne(t *testing.T) {
	llm := llmtest.NewServer(t)
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		last := r.LastMessage()
		switch {
		case last.Role == "tool":
			return llmtest.Text("scheduled")
		case strings.Contains(r.LastUserText(), "remind me"):
			return llmtest.ToolCalls(llmtest.Call("cron", `{"action":"add","message":"stretch now","every_seconds":1}`))
		case strings.Contains(r.LastUserText(), "stretch now"):
			return llmtest.Text("Time to stretch!")
		}
		return llmtest.Text("ok")
	})
	tf := startFleet(t, llm, t.TempDir(), 1)
	if out := ask(t, tf, "cron1", "remind me every second to stretch"); out.GetContent() != "scheduled" {
		t.Fatalf("reply = %v", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Two fires, each one turn answered in the chat that made the job.
	var fires int
	for fires < 2 && ctx.Err() == nil {
		fires = 0
		for _, r := range lastReplies(t, tf.Bus.JS, tf.Bus.Space.OutboundStream()) {
			if r.GetContent() == "Time to stretch!" && r.GetChatId() == "cron1" {
				fires++
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if fires < 2 {
		t.Fatalf("job fired %d times in 30s", fires)
	}
	// The job is still listed for the operator (`nanofleet cron list`,
	// whose output TestCron in package main checks).
	s, err := schedule.Open(ctx, tf.Bus)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(jobs, func(j schedule.Job) bool { return strings.Contains(j.Message, "stretch now") }) {
		t.Fatalf("cron list: %v", jobs)
	}
}
