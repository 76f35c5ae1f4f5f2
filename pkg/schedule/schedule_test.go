package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/agenttool"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/metakey"
	"github.com/nanofleet/nanofleet/pkg/schedule"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

func setup(t *testing.T) (*bus.Bus, *schedule.Scheduler) {
	t.Helper()
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	if err := bus.Provision(ctx, b, bustest.TestLayout(), schedule.Assets); err != nil {
		t.Fatal(err)
	}
	// Idempotent.
	if err := bus.Provision(ctx, b, bustest.TestLayout(), schedule.Assets); err != nil {
		t.Fatalf("second provision: %v", err)
	}
	s, err := schedule.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	return b, s
}

func turn(channel, chat string) *agenttool.TurnContext {
	return &agenttool.TurnContext{
		SessionKey: channel + ":" + chat,
		TurnID:     "in1",
		Inbound:    &nanofleetv1.InboundMessage{Id: "1", Channel: channel, ChatId: chat, Kind: nanofleetv1.InboundKind_INBOUND_KIND_USER},
	}
}

// call runs the tool the way the worker does: arguments parsed against the
// tool's schema first.
func call(t *testing.T, tool *schedule.Tool, tc *agenttool.TurnContext, argsJSON string) (string, error) {
	t.Helper()
	args, err := toolschema.MustCompile(tool.Tool().Parameters).Parse(argsJSON)
	if err != nil {
		return "", err
	}
	return tool.Call(t.Context(), tc, args)
}

func TestToolAddListRemove(t *testing.T) {
	_, s := setup(t)
	tool, err := schedule.NewTool(s)
	if err != nil {
		t.Fatal(err)
	}
	tc := turn("telegram", "42")
	out, err := call(t, tool, tc, `{"action":"add","message":"stretch","every_seconds":"3600"}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "every 1h0m0s") || !strings.Contains(out, "Next run") {
		t.Errorf("add = %q", out)
	}
	if _, err := call(t, tool, tc, `{"action":"add","message":"standup","cron_expr":"0 9 * * 1-5","tz":"Europe/Berlin"}`); err != nil {
		t.Fatal(err)
	}
	// Another chat's jobs are not this chat's.
	other := turn("slack", "C1")
	if _, err := call(t, tool, other, `{"action":"add","message":"other","every_seconds":60}`); err != nil {
		t.Fatal(err)
	}

	jobs, err := s.List(t.Context(), tc.SessionKey)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("List = %v, %v; want 2 jobs", jobs, err)
	}
	for _, j := range jobs {
		if j.Next.IsZero() || !j.Next.After(time.Now()) {
			t.Errorf("job %s next = %s", j.ID, j.Next)
		}
		if j.Channel != "telegram" || j.ChatID != "42" || j.SessionKey != "telegram:42" {
			t.Errorf("job %s bound to %s/%s/%s", j.ID, j.SessionKey, j.Channel, j.ChatID)
		}
	}
	out, err = call(t, tool, tc, `{"action":"list"}`)
	if err != nil || !strings.Contains(out, "stretch") || !strings.Contains(out, "standup") || strings.Contains(out, "other") {
		t.Fatalf("list = %q, %v", out, err)
	}
	if !strings.Contains(out, "cron 0 9 * * 1-5 (Europe/Berlin)") {
		t.Errorf("list does not show the zone: %q", out)
	}

	// The operator sees every session's jobs with the next fire time
	// (the output of `nanofleet cron list` is tested in services/nanofleet,
	// TestCron).
	all, err := s.List(t.Context(), "")
	if err != nil || len(all) != 3 {
		t.Fatalf("List of every session = %v, %v; want 3 jobs", all, err)
	}
	if !slices.ContainsFunc(all, func(j schedule.Job) bool { return j.SessionKey == "slack:C1" && !j.Next.IsZero() }) {
		t.Errorf("List of every session lacks slack:C1's job with its next fire time: %v", all)
	}

	if _, err := call(t, tool, other, `{"action":"remove","job_id":"`+jobs[0].ID+`"}`); err == nil {
		t.Error("another session removed this session's job")
	}
	if out, err := call(t, tool, tc, `{"action":"remove","job_id":"`+jobs[0].ID+`"}`); err != nil || !strings.Contains(out, "Removed") {
		t.Fatalf("remove = %q, %v", out, err)
	}
	// The operator removes any session's job (no session key).
	if _, err := s.Remove(t.Context(), "", jobs[1].ID); err != nil {
		t.Fatalf("operator remove: %v", err)
	}
	if jobs, _ := s.List(t.Context(), tc.SessionKey); len(jobs) != 0 {
		t.Errorf("jobs left after remove: %v", jobs)
	}
	if _, err := s.Remove(t.Context(), "", "nope"); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("remove unknown = %v", err)
	}
}

func TestToolRejectsBadInput(t *testing.T) {
	_, s := setup(t)
	tool, err := schedule.NewTool(s)
	if err != nil {
		t.Fatal(err)
	}
	tc := turn("cli", "direct")
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	tests := []struct {
		name, args, reason string
	}{
		{"invalid cron", `{"action":"add","message":"x","cron_expr":"61 * * * *"}`, "minute"},
		{"cron with 4 fields", `{"action":"add","message":"x","cron_expr":"* * * *"}`, "4 fields"},
		{"unknown zone", `{"action":"add","message":"x","cron_expr":"0 9 * * *","tz":"Mars/Olympus"}`, "unknown time zone"},
		{"unknown zone with at", `{"action":"add","message":"x","at":"2099-01-01T10:00:00","tz":"Europe/Atlantis"}`, "unknown time zone"},
		{"past", `{"action":"add","message":"x","at":"` + past + `"}`, "in the past"},
		{"not a time", `{"action":"add","message":"x","at":"next tuesday"}`, "not an ISO time"},
		{"two timings", `{"action":"add","message":"x","every_seconds":5,"cron_expr":"* * * * *"}`, "exactly one"},
		{"no timing", `{"action":"add","message":"x"}`, "exactly one"},
		{"tz with every", `{"action":"add","message":"x","every_seconds":5,"tz":"UTC"}`, "tz applies"},
		{"no message", `{"action":"add","every_seconds":5}`, "message is required"},
		{"zero interval", `{"action":"add","message":"x","every_seconds":0}`, "every_seconds"},
		{"interval past a duration's range", `{"action":"add","message":"x","every_seconds":36028797018964028}`, "every_seconds"},
		{"bad action", `{"action":"pause"}`, "action"},
		{"remove without id", `{"action":"remove"}`, "job_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := call(t, tool, tc, tt.args)
			if err == nil {
				t.Fatalf("accepted: %q", out)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not name the reason %q", err, tt.reason)
			}
			if !errors.Is(err, toolschema.ErrInvalidArguments) {
				t.Errorf("error %v is not an invalid-arguments error", err)
			}
		})
	}
	if jobs, err := s.List(t.Context(), tc.SessionKey); err != nil || len(jobs) != 0 {
		t.Errorf("jobs after bad input: %v, %v", jobs, err)
	}
}

// TestToolRefusesAnIntervalPastADuration: the tool checks every_seconds'
// range itself, not only through its schema's maximum: multiplied out
// first, 36028797018964028 s (a billion years) wrapped around to exactly
// a minute, and the job fired every minute.
func TestToolRefusesAnIntervalPastADuration(t *testing.T) {
	_, s := setup(t)
	tool, err := schedule.NewTool(s)
	if err != nil {
		t.Fatal(err)
	}
	tc := turn("cli", "direct")
	args := map[string]any{"action": "add", "message": "x", "every_seconds": int64(36028797018964028)}
	if out, err := tool.Call(t.Context(), tc, args); !errors.Is(err, schedule.ErrInvalidSchedule) || !strings.Contains(err.Error(), "every_seconds") {
		t.Errorf("Call = %q, %v; want ErrInvalidSchedule naming every_seconds", out, err)
	}
}

func TestToolRefusesJobFromJob(t *testing.T) {
	_, s := setup(t)
	tool, _ := schedule.NewTool(s)
	tc := turn("cli", "direct")
	tc.Inbound.Kind = nanofleetv1.InboundKind_INBOUND_KIND_CRON
	if _, err := call(t, tool, tc, `{"action":"add","message":"x","every_seconds":60}`); !errors.Is(err, schedule.ErrNestedJob) {
		t.Fatalf("add from a fired job = %v", err)
	}
}

// inbound collects what reaches the inbound stream.
func inbound(t *testing.T, b *bus.Bus) <-chan *nanofleetv1.InboundMessage {
	t.Helper()
	ch := make(chan *nanofleetv1.InboundMessage, 100)
	cons, err := b.JS.CreateOrUpdateConsumer(t.Context(), b.Space.InboundStream(), jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		in := &nanofleetv1.InboundMessage{}
		if err := proto.Unmarshal(m.Data(), in); err != nil {
			t.Errorf("inbound: %v", err)
		}
		if in.GetId() != m.Headers().Get("Nats-Msg-Id") {
			t.Errorf("inbound id %q, Nats-Msg-Id %q", in.GetId(), m.Headers().Get("Nats-Msg-Id"))
		}
		_ = m.Ack()
		ch <- in
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return ch
}

func runRelay(t *testing.T, b *bus.Bus, opts ...schedule.RelayOption) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r, err := schedule.NewRelay(ctx, b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	svctest.Run(t, r.Run)
}

func TestRelayTurnsFireIntoInbound(t *testing.T) {
	b, s := setup(t)
	got := inbound(t, b)
	runRelay(t, b)
	runRelay(t, b) // a second relay changes nothing: one inbound per fire
	at := time.Now().Add(1500 * time.Millisecond).Truncate(time.Second)
	j, err := s.Add(t.Context(), schedule.Job{
		SessionKey: "team:alpha", Channel: "slack", ChatID: "C1.x", Message: "post the report",
		Spec: schedule.Spec{At: at},
	})
	if err != nil {
		t.Fatal(err)
	}
	var in *nanofleetv1.InboundMessage
	select {
	case in = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no inbound message from the fire")
	}
	// The time is the contract: a one-shot job fires at its time, not
	// before, and within the scheduler's one-second precision after. The
	// fire's own time (the server's, carried as ReceivedAt) says when it
	// fired, however late the relay and this test got to it.
	if d := in.GetReceivedAt().AsTime().Sub(at); d < 0 || d >= time.Second {
		t.Errorf("fired %s after its time", d)
	}
	if in.GetKind() != nanofleetv1.InboundKind_INBOUND_KIND_CRON || in.GetSessionKey() != "team:alpha" ||
		in.GetChannel() != "slack" || in.GetChatId() != "C1.x" || in.GetMetadata()[schedule.MetaJobID] != j.ID {
		t.Errorf("inbound = %v", in)
	}
	if !strings.Contains(in.GetContent(), "post the report") || !strings.HasPrefix(in.GetId(), "sched:") {
		t.Errorf("inbound id %q content %q", in.GetId(), in.GetContent())
	}
	// The one-time job is gone once fired, and fired once: when the
	// relays have acked every fire, the inbound stream has stored one
	// message (it is a work queue: the one taken is gone, its sequence
	// stays).
	if jobs, _ := s.List(t.Context(), "team:alpha"); len(jobs) != 0 {
		t.Errorf("one-time job still listed: %v", jobs)
	}
	bustest.Eventually(t, 10*time.Second, func() error {
		info, err := b.JS.Consumer(t.Context(), schedule.StreamName(b.Space), schedule.RelayConsumer)
		if err != nil {
			return err
		}
		if info.CachedInfo().NumPending+uint64(info.CachedInfo().NumAckPending) > 0 {
			return fmt.Errorf("relays still hold fires: %+v", info.CachedInfo())
		}
		return nil
	})
	inb, err := b.JS.Stream(t.Context(), b.Space.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	if n := inb.CachedInfo().State.LastSeq; n != 1 {
		t.Errorf("%d inbound messages stored from one fire", n)
	}
}

func TestRelayPrepareCanSkipAndRewrite(t *testing.T) {
	b, s := setup(t)
	got := inbound(t, b)
	n := 0
	runRelay(t, b, schedule.WithPrepare(func(_ context.Context, in *nanofleetv1.InboundMessage) (bool, error) {
		n++
		if n == 1 {
			return false, nil
		}
		in.Content = "rewritten"
		return true, nil
	}))
	if _, err := s.Add(t.Context(), schedule.Job{
		SessionKey: "cli:x", Channel: "cli", ChatID: "x", Spec: schedule.Spec{Every: time.Second},
		Kind: nanofleetv1.InboundKind_INBOUND_KIND_HEARTBEAT,
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case in := <-got:
		if in.GetContent() != "rewritten" || in.GetKind() != nanofleetv1.InboundKind_INBOUND_KIND_HEARTBEAT || in.GetSessionKey() != "" {
			t.Errorf("inbound = %v", in)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no inbound message")
	}
	if n < 2 {
		t.Errorf("prepare ran %d times", n)
	}
}

func TestAddRejectsWhatTheServerWould(t *testing.T) {
	_, s := setup(t)
	_, err := s.Add(t.Context(), schedule.Job{SessionKey: "cli:x", Channel: "cli", ChatID: "x", Spec: schedule.Spec{Cron: "0 0 30 2 *"}})
	if !errors.Is(err, schedule.ErrInvalidSchedule) {
		t.Errorf("30 February = %v", err)
	}
	_, err = s.Add(t.Context(), schedule.Job{SessionKey: "cli:x", Channel: "cli", Spec: schedule.Spec{Every: time.Second}})
	if !errors.Is(err, schedule.ErrInvalidSchedule) {
		t.Errorf("job without chat = %v", err)
	}
}

// A job's fires are the turns of the user who asked for it: their
// sender id (their token budget, their user-scoped memory) and, made in a
// group, the group's marker. As sender "cron" every user's fires on a
// channel shared one budget and one user-scoped memory.
func TestFireIsItsMakersTurn(t *testing.T) {
	b, s := setup(t)
	got := inbound(t, b)
	runRelay(t, b)
	tool, err := schedule.NewTool(s)
	if err != nil {
		t.Fatal(err)
	}
	dm := turn("telegram", "42")
	dm.Inbound.SenderId = "ada"
	group := turn("telegram", "-100")
	group.Inbound.SenderId = "bob"
	group.Inbound.Metadata = map[string]string{"chat_type": "supergroup"}
	for _, tc := range []*agenttool.TurnContext{dm, group} {
		if _, err := call(t, tool, tc, `{"action":"add","message":"tick","every_seconds":1}`); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := s.List(t.Context(), dm.SessionKey)
	if err != nil || len(jobs) != 1 || jobs[0].SenderID != "ada" || jobs[0].Group {
		t.Errorf("jobs of the DM = %+v, %v; want one by ada, not a group's", jobs, err)
	}
	want := map[string]bool{"42": false, "-100": true}
	for len(want) > 0 {
		in := bustest.Receive(t, got, 10*time.Second)
		isGroup, ok := want[in.GetChatId()]
		if !ok {
			continue
		}
		delete(want, in.GetChatId())
		sender := map[string]string{"42": "ada", "-100": "bob"}[in.GetChatId()]
		if in.GetSenderId() != sender || (in.GetMetadata()[metakey.IsGroup] == "true") != isGroup {
			t.Errorf("fire in %s: sender %q, metadata %v; want sender %q, group %v", in.GetChatId(), in.GetSenderId(), in.GetMetadata(), sender, isGroup)
		}
	}
}

// A job that fires faster than its turns are done does not pile fires up
// in the inbound stream: a fire joins the last one while that one still
// waits for its turn, and the job fires again once it is done. Piled up,
// 50 jobs every second took 745 slots of the workers' consumer in 15 s.
func TestFireWaitsForTheLastOnesTurn(t *testing.T) {
	b, s := setup(t)
	runRelay(t, b)
	relay, err := b.JS.Consumer(t.Context(), schedule.StreamName(b.Space), schedule.RelayConsumer)
	if err != nil {
		t.Fatal(err)
	}
	j, err := s.Add(t.Context(), schedule.Job{SessionKey: "cli:x", Channel: "cli", ChatID: "x", Message: "tick", Spec: schedule.Spec{Every: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	inbound, err := b.JS.Stream(t.Context(), b.Space.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	relayed := func(n uint64) func() error {
		return func() error {
			info, err := relay.Info(t.Context())
			if err == nil && info.AckFloor.Consumer < n {
				err = fmt.Errorf("%d fires handled", info.AckFloor.Consumer)
			}
			return err
		}
	}
	// Four fires handled, none of their turns done.
	bustest.Eventually(t, 15*time.Second, relayed(4))
	info, err := inbound.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("%d fires of job %s wait in the inbound stream, want 1", info.State.Msgs, j.ID)
	}
	// Its turn done (the message acked away), the job fires again.
	if err := inbound.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 15*time.Second, func() error {
		info, err := inbound.Info(t.Context())
		if err == nil && info.State.Msgs != 1 {
			err = fmt.Errorf("%d fires wait", info.State.Msgs)
		}
		return err
	})
	// A removed job's record of its last fire goes with it.
	if _, err := s.Remove(t.Context(), "cli:x", j.ID); err != nil {
		t.Fatal(err)
	}
	st, err := b.JS.Stream(t.Context(), schedule.StreamName(b.Space))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetLastMsgForSubject(t.Context(), b.Space.ScheduleRelayed("cli:x", j.ID)); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("relayed record after remove: %v", err)
	}
}

// A fire relayed but not recorded comes back, and is recorded against the
// message already relayed: the record is what holds the job's next fire
// back while this one waits. The schedule stream refuses the record here
// (a message size limit below it) while the inbound stream takes the fire.
// Acked without its record, a fire let the job's next ones pile up.
func TestFireUnrecordedComesBack(t *testing.T) {
	b, s := setup(t)
	ctx := t.Context()
	j, err := s.Add(ctx, schedule.Job{SessionKey: "cli:x", Channel: "cli", ChatID: "x", Message: "once",
		Spec: schedule.Spec{At: time.Now().Add(time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.JS.Stream(ctx, schedule.StreamName(b.Space))
	if err != nil {
		t.Fatal(err)
	}
	// The fire is in the stream before any relay runs and before the limit.
	bustest.Eventually(t, 15*time.Second, func() error {
		_, err := st.GetLastMsgForSubject(ctx, b.Space.ScheduleFire("cli:x", j.ID))
		return err
	})
	limit := func(size int32) {
		t.Helper()
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cfg := info.Config
		cfg.MaxMsgSize = size
		if _, err := b.JS.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	normal := bustest.TestLayout().MaxMsgSize
	limit(1)
	runRelay(t, b)
	relay, err := b.JS.Consumer(ctx, schedule.StreamName(b.Space), schedule.RelayConsumer)
	if err != nil {
		t.Fatal(err)
	}
	inbound, err := b.JS.Stream(ctx, b.Space.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	// Relayed, not recorded, so delivered again.
	bustest.Eventually(t, 15*time.Second, func() error {
		info, err := relay.Info(ctx)
		if err == nil && (info.NumRedelivered == 0 || info.NumAckPending == 0) {
			err = fmt.Errorf("fire redelivered %d, pending %d", info.NumRedelivered, info.NumAckPending)
		}
		return err
	})
	if _, err := st.GetLastMsgForSubject(ctx, b.Space.ScheduleRelayed("cli:x", j.ID)); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("record under the limit: %v", err)
	}
	limit(normal)
	bustest.Eventually(t, 15*time.Second, func() error {
		info, err := relay.Info(ctx)
		if err == nil && info.NumAckPending != 0 {
			err = fmt.Errorf("%d fires pending", info.NumAckPending)
		}
		return err
	})
	info, err := inbound.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("%d inbound messages from one fire, want 1", info.State.Msgs)
	}
	rec, err := st.GetLastMsgForSubject(ctx, b.Space.ScheduleRelayed("cli:x", j.ID))
	if err != nil {
		t.Fatalf("no record of the relayed fire: %v", err)
	}
	if want := fmt.Sprint(info.State.LastSeq); string(rec.Data) != want {
		t.Errorf("record names inbound sequence %s, want %s (the fire relayed first)", rec.Data, want)
	}
}
