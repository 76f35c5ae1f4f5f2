package jobstest

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/schedule"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// firedTurns counts the model's turns per fire (each fire's message is
// unique: it names the fire time).
type firedTurns struct {
	mu     sync.Mutex
	byFire map[string]int
}

func (f *firedTurns) add(text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byFire == nil {
		f.byFire = map[string]int{}
	}
	f.byFire[text]++
}

func (f *firedTurns) snapshot() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.byFire)
}

// cronModel schedules on "schedule <args json>", removes on "unschedule
// <id>", and answers every fired job with "tick".
func cronModel(fires *firedTurns) llmtest.Script {
	return func(r *llmtest.RecordedRequest) llmtest.Reply {
		if lastIsTool(r) {
			return llmtest.Text("done: " + llmtest.MessageText(r.LastMessage()))
		}
		text := r.LastUserText()
		switch {
		case strings.HasPrefix(text, "[Scheduled task"):
			fires.add(text)
			return llmtest.Text("tick")
		case strings.HasPrefix(text, "schedule "):
			return llmtest.ToolCalls(llmtest.Call("cron", `{"action":"add","message":"say tick",`+strings.TrimPrefix(text, "schedule ")+`}`))
		case strings.HasPrefix(text, "unschedule "):
			return llmtest.ToolCalls(llmtest.Call("cron", `{"action":"remove","job_id":"`+strings.TrimPrefix(text, "unschedule ")+`"}`))
		}
		return llmtest.Text("ok")
	}
}

// fireSecond reads the fire time out of a fired job's reply (its inbound
// id is "sched:<session>:<job>:<unix second>").
func fireSecond(t *testing.T, o *nanofleetv1.OutboundMessage) time.Time {
	t.Helper()
	i := strings.LastIndexByte(o.GetReplyTo(), ':')
	sec, err := strconv.ParseInt(o.GetReplyTo()[i+1:], 10, 64)
	if err != nil {
		t.Fatalf("reply_to %q: %v", o.GetReplyTo(), err)
	}
	return time.Unix(sec, 0)
}

func isFire(o *nanofleetv1.OutboundMessage) bool { return isFireIn("c1")(o) }

// isFireIn matches the replies to fired jobs of cli:<chat>.
func isFireIn(chat string) func(*nanofleetv1.OutboundMessage) bool {
	return func(o *nanofleetv1.OutboundMessage) bool {
		return strings.HasPrefix(o.GetReplyTo(), "sched:") && o.GetChannel() == "cli" && o.GetChatId() == chat
	}
}

// TestCronEveryTwoSeconds: a job every 2 s fires on time with 3 workers,
// one turn per fire; it survives every service and the NATS server
// restarting; removing it stops it.
func TestCronEveryTwoSeconds(t *testing.T) {
	dir := t.TempDir()
	f := newFleetIn(t, dir)
	var fires firedTurns
	model := llmtest.NewServer(t)
	model.Handle(cronModel(&fires))
	var nodes []*node
	for i := range 3 {
		nodes = append(nodes, f.startNode(fmt.Sprint("w", i+1), model, nodeConfig{slots: 2}))
	}

	// everyTwoSeconds has the model schedule a job every 2 s in
	// cli:<chat> and returns it.
	everyTwoSeconds := func(chat, id string) schedule.Job {
		t.Helper()
		f.send(chat, id, `schedule "every_seconds":2`)
		created := f.await(10*time.Second, "reply to schedule request "+id, replyTo(id))
		if !strings.Contains(created.msg.GetContent(), "Created job") {
			t.Fatalf("schedule reply = %q", created.msg.GetContent())
		}
		jobs, err := nodes[0].sched.List(t.Context(), "cli:"+chat)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("jobs of %s = %v, %v", chat, jobs, err)
		}
		return jobs[0]
	}
	job := everyTwoSeconds("c1", "1")

	// checkFires waits for want fires and checks the fire times they name
	// (the server's, in their ids) against the job's schedule: each fire
	// counted on time lands on the schedule's grid, when one is given
	// (fire times the server missed while it was down are skipped and the
	// grid restarts, so a restart gives none), and comes one interval
	// after the counted fire before it: none skipped, none doubled. How
	// long a turn took after its fire is not checked: a loaded machine may
	// take any time, and that is for the bench to measure.
	every := job.Spec.Every
	checkFires := func(phase string, want int, grid time.Time, onTime func(i int) bool) []received {
		t.Helper()
		f.await(15*time.Second, fmt.Sprintf("%d fires (%s)", want, phase), func(*nanofleetv1.OutboundMessage) bool {
			return len(distinct(f.all(isFire))) >= want
		})
		got := distinct(f.all(isFire))
		for i, r := range got {
			if !onTime(i) {
				continue
			}
			at := fireSecond(t, r.msg)
			if r.at.Before(at) {
				t.Errorf("%s: fire at %s answered before it fired, at %s", phase, at.Format(time.TimeOnly), r.at.Format(time.StampMilli))
			}
			if !grid.IsZero() && at.Sub(grid)%every != 0 {
				t.Errorf("%s: fire at %s, off the schedule of every %s from %s", phase, at.Format(time.TimeOnly), every, grid.Format(time.TimeOnly))
			}
			if i > 0 && onTime(i-1) {
				if gap := at.Sub(fireSecond(t, got[i-1].msg)); gap != every {
					t.Errorf("%s: %s between fires, want %s", phase, gap, every)
				}
			}
		}
		return got
	}
	checkFires("3 workers", 3, job.Next, func(int) bool { return true })

	// Everything stops: workers, relays, the NATS server.
	for _, n := range nodes {
		n.stop()
	}
	before, first := distinct(f.all(isFire)), f
	f.srv.Shutdown()
	f = newFleetIn(t, dir)
	nodes = nodes[:0]
	for i := range 3 {
		nodes = append(nodes, f.startNode(fmt.Sprint("w", i+4), model, nodeConfig{slots: 2}))
	}
	// The first fire after the restart may be one that waited for a relay.
	after := checkFires("after restart", 3, time.Time{}, func(i int) bool { return i > 0 })
	if fireSecond(t, after[0].msg).Before(fireSecond(t, before[len(before)-1].msg)) {
		t.Errorf("fires went back in time across the restart")
	}

	f.send("c1", "2", "unschedule "+job.ID)
	removed := f.await(10*time.Second, "reply to the remove request", replyTo("2"))
	if !strings.Contains(removed.msg.GetContent(), "Removed job "+job.ID) {
		t.Fatalf("remove reply = %q", removed.msg.GetContent())
	}
	// A second job, on c2, made after the removal: once it has fired
	// three times the removed one had three intervals to fire in, by
	// the same scheduler.
	witness := everyTwoSeconds("c2", "3")
	f.await(15*time.Second, "3 fires of the second job", func(*nanofleetv1.OutboundMessage) bool {
		return len(distinct(f.all(isFireIn("c2")))) >= 3
	})
	for _, r := range f.all(isFire) {
		if at := fireSecond(t, r.msg); at.After(removed.at.Add(500 * time.Millisecond)) {
			t.Errorf("job fired at %s after its removal at %s", at.Format(time.TimeOnly), removed.at.Format(time.StampMilli))
		}
	}
	if jobs, _ := nodes[0].sched.List(t.Context(), "cli:c1"); len(jobs) != 0 {
		t.Errorf("jobs after remove: %v", jobs)
	}

	// One turn per fire: each fire answered once, and the model asked once
	// per fire.
	answered := map[string]int{}
	for _, r := range slices.Concat(first.all(isFire), f.all(isFire), f.all(isFireIn("c2"))) {
		answered[r.msg.GetReplyTo()]++
	}
	for id, n := range answered {
		if n != 1 {
			t.Errorf("fire %s answered %d times", id, n)
		}
	}
	all := append(before, distinct(f.all(isFire))...)
	turns := fires.snapshot()
	// The second job's turns are its own (their text names the job).
	maps.DeleteFunc(turns, func(text string, _ int) bool { return strings.Contains(text, witness.ID) })
	if len(turns) != len(all) {
		t.Errorf("model ran turns for %d fires, %d fires were answered", len(turns), len(all))
	}
	for text, n := range turns {
		if n != 1 {
			t.Errorf("model ran %d turns for one fire: %q", n, text)
		}
	}
}

// distinct keeps the first reply per inbound message.
func distinct(rs []received) []received {
	seen := map[string]bool{}
	var out []received
	for _, r := range rs {
		if !seen[r.msg.GetReplyTo()] {
			seen[r.msg.GetReplyTo()] = true
			out = append(out, r)
		}
	}
	return out
}

// TestOneTimeJobInAnotherZone: "at" a wall-clock time in Kathmandu
// (UTC+05:45) fires at that instant.
func TestOneTimeJobInAnotherZone(t *testing.T) {
	f := newFleet(t)
	var fires firedTurns
	model := llmtest.NewServer(t)
	model.Handle(cronModel(&fires))
	// The worker's own zone is another one: the job's tz wins.
	ny, _ := time.LoadLocation("America/New_York")
	n := f.startNode("w1", model, nodeConfig{location: ny})
	kathmandu, err := time.LoadLocation("Asia/Kathmandu")
	if err != nil {
		t.Fatal(err)
	}
	target := time.Now().Add(3 * time.Second).Truncate(time.Second)
	wall := target.In(kathmandu).Format("2006-01-02T15:04:05")
	f.send("c1", "1", `schedule "at":"`+wall+`","tz":"Asia/Kathmandu"`)
	created := f.await(10*time.Second, "reply to the schedule request", replyTo("1"))
	if !strings.Contains(created.msg.GetContent(), "+05:45") {
		t.Errorf("created = %q, want the next run shown in +05:45", created.msg.GetContent())
	}
	jobs, err := n.sched.List(t.Context(), "cli:c1")
	if err != nil || len(jobs) != 1 || !jobs[0].Next.Equal(target) {
		t.Fatalf("jobs = %v, %v; want one firing at %s", jobs, err, target)
	}
	fire := f.await(10*time.Second, "the fire", isFire)
	if at := fireSecond(t, fire.msg); !at.Equal(target) {
		t.Errorf("fired at %s, want %s", at, target)
	}
	// The fire time above proves the instant; how soon the turn answered
	// is not a unit test's to time.
	if fire.at.Before(target) {
		t.Errorf("answered at %s, before the target %s", fire.at.Format(time.StampMilli), target.Format(time.TimeOnly))
	}
	if jobs, _ := n.sched.List(t.Context(), "cli:c1"); len(jobs) != 0 {
		t.Errorf("one-time job still listed after firing: %v", jobs)
	}
}

// TestBadScheduleAnsweredToModel: an invalid cron expression and an
// unknown zone come back to the model with the reason; no job is created.
func TestBadScheduleAnsweredToModel(t *testing.T) {
	f := newFleet(t)
	model := llmtest.NewServer(t)
	model.Enqueue(
		llmtest.ToolCalls(
			llmtest.Call("cron", `{"action":"add","message":"x","cron_expr":"0 25 * * *"}`),
			llmtest.Call("cron", `{"action":"add","message":"x","cron_expr":"0 9 * * *","tz":"Europe/Atlantis"}`),
		),
		llmtest.Text("Sorry, I could not schedule that."),
	)
	n := f.startNode("w1", model, nodeConfig{})
	f.send("c1", "1", "remind me")
	f.await(10*time.Second, "reply", replyTo("1"))
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model called %d times", len(reqs))
	}
	results := toolResults(reqs[1])
	if len(results) != 2 || !strings.Contains(results[0], "hour") || !strings.Contains(results[0], "out of range") ||
		!strings.Contains(results[1], "unknown time zone") || !strings.Contains(results[1], "Europe/Atlantis") {
		t.Errorf("tool results = %q", results)
	}
	if jobs, err := n.sched.List(t.Context(), ""); err != nil || len(jobs) != 0 {
		t.Errorf("jobs = %v, %v", jobs, err)
	}
}
