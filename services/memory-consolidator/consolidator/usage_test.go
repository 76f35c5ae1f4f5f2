package consolidator_test

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/schedule"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/syncbuf"
	"github.com/nanofleet/nanofleet/pkg/usage"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/subagent"
	"github.com/nanofleet/nanofleet/services/agent-worker/worker"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/memtest"
)

// TestConsolidationIsCountedForItsUser: the model calls that consolidate
// a session's turns count in the daily token usage of the user whose turn
// asked for them, as the turns do: a sender's own chat, a group turn
// (its sender, not the group), a cron fire (the job's maker) and a
// subagent's task (the user who spawned it). Each user's count is their
// turns' tokens plus exactly what the fake model reported for the
// consolidation calls of their turns; a user whose turns asked for no
// consolidation is counted their turns alone, and no one else is counted
// anything.
func TestConsolidationIsCountedForItsUser(t *testing.T) {
	const (
		turnPrompt, turnCompletion = 40, 2
		consPrompt, consCompletion = 1000, 100
	)
	f := startFleetWith(t, memory.KindSession, 600, memtest.Consolidate, func(c *worker.Config) { c.DailyTokenBudget = 10_000_000 })
	f.llm.Handle(func(req *llmtest.RecordedRequest) llmtest.Reply {
		if memtest.IsConsolidation(req) {
			return memtest.Consolidate(req).WithUsage(consPrompt, consCompletion)
		}
		return llmtest.Text("ok, noted.").WithUsage(turnPrompt, turnCompletion)
	})
	group := map[string]string{"chat_type": "group"}
	cases := []struct {
		name  string
		payer string // whose budget
		turns int    // 0: one turn, which asks for no consolidation
		in    func(i int) *nanofleetv1.InboundMessage
	}{
		{"own chat", "telegram:100", 4, func(int) *nanofleetv1.InboundMessage {
			return &nanofleetv1.InboundMessage{Channel: "telegram", ChatId: "100", SenderId: "100"}
		}},
		{"group turn", "telegram:200", 4, func(int) *nanofleetv1.InboundMessage {
			return &nanofleetv1.InboundMessage{Channel: "telegram", ChatId: "-5", SenderId: "200", Metadata: group}
		}},
		{"cron fire", "telegram:300", 4, func(int) *nanofleetv1.InboundMessage {
			return &nanofleetv1.InboundMessage{Channel: "telegram", ChatId: "-6", SenderId: "300", Kind: nanofleetv1.InboundKind_INBOUND_KIND_CRON,
				Metadata: map[string]string{schedule.MetaJobID: "job1", "chat_type": "group"}}
		}},
		{"subagent", "telegram:400", 4, func(int) *nanofleetv1.InboundMessage {
			return &nanofleetv1.InboundMessage{Channel: subagent.Channel, ChatId: "child1", SenderId: subagent.ChildSender("telegram", "400"),
				Metadata: map[string]string{subagent.MetaToolset: subagent.ToolsetSubagent, subagent.MetaID: "child1", subagent.MetaParent: "telegram:400"}}
		}},
		{"no consolidation", "telegram:500", 0, func(int) *nanofleetv1.InboundMessage {
			return &nanofleetv1.InboundMessage{Channel: "telegram", ChatId: "500", SenderId: "500"}
		}},
	}
	filler := strings.Repeat("and some more words about the day ", 20)
	for ci, tc := range cases {
		turns := max(tc.turns, 1)
		var key string
		for i := range turns {
			in := tc.in(i)
			in.Id = fmt.Sprintf("m%d-%d", ci, i)
			in.Content = fmt.Sprintf("CASE%d turn %d: %s", ci, i, filler)
			if tc.turns == 0 {
				in.Content = fmt.Sprintf("CASE%d: hello", ci)
			}
			f.send(t, in)
			key = worker.SessionKey(in)
		}
		if tc.turns > 0 {
			// The first consolidation of the session done.
			memtest.WaitCursor(t, f.b, key, 1, 20*time.Second)
		}
	}
	marker := func(ci int) string { return fmt.Sprintf("CASE%d ", ci) }
	count, err := usage.Open(t.Context(), f.b)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 20*time.Second, func() error {
		// The consolidation calls made so far, per case; the worker asks
		// after a turn's reply, so more may come until the end.
		calls := make([]int64, len(cases))
		for _, r := range f.llm.Requests() {
			if !memtest.IsConsolidation(&r) {
				continue
			}
			for ci := range cases {
				if strings.Contains(r.LastUserText(), marker(ci)) {
					calls[ci]++
				}
			}
		}
		var problems []string
		for ci, tc := range cases {
			if tc.turns > 0 && calls[ci] == 0 {
				problems = append(problems, tc.name+": no consolidation call yet")
				continue
			}
			want := int64(max(tc.turns, 1))*(turnPrompt+turnCompletion) + calls[ci]*(consPrompt+consCompletion)
			got, err := count.Spent(t.Context(), tc.payer)
			if err != nil {
				return err
			}
			if got != want {
				problems = append(problems, fmt.Sprintf("%s: %s counted %d tokens, want %d (%d consolidation calls)", tc.name, tc.payer, got, want, calls[ci]))
			}
		}
		if len(problems) > 0 {
			return fmt.Errorf("%s", strings.Join(problems, "; "))
		}
		return nil
	})
	// No one else was counted anything: not the group, not "cron", not
	// the subagent's channel.
	kv, err := f.b.KV(t.Context(), usage.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, tc := range cases {
		want[usage.Key(tc.payer, time.Now())] = true
	}
	for k := range keys.Keys() {
		if !want[k] {
			e, _ := kv.Get(t.Context(), k)
			var n int64
			if e != nil {
				n, _ = strconv.ParseInt(string(e.Value()), 10, 64)
			}
			t.Errorf("usage counted for %s: %d tokens", k, n)
		}
	}
}

// TestConsolidationCommitsWhateverItsCount: counting a consolidation's
// tokens never stands in its way. A user over their budget is
// consolidated (their memory is saved) and counted; when the count fails
// (here the payer's count is not a number), the consolidation still
// commits, the failure is logged, and the request is acknowledged, not
// retried: the model is asked once. (A deleted usage bucket fails the
// count too, but only after bus.CallTimeout: its reads find no responder,
// which is a stream without a leader as much as a missing one, and
// bus.Modify tries those again.)
func TestConsolidationCommitsWhateverItsCount(t *testing.T) {
	const used = 1100 // the fake model's usage per call
	for _, tc := range []struct {
		name      string
		before    int64 // the payer's tokens today before
		garbage   bool  // the payer's count today is not a number
		wantSpent int64 // -1: not read
		wantLog   string
	}{
		{"over budget", 1_000_000, false, 1_000_000 + used, ""},
		{"count fails", 0, true, -1, "token usage: consolidation not counted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, b := memtest.Start(t)
			srv := llmtest.NewServer(t)
			srv.Handle(func(req *llmtest.RecordedRequest) llmtest.Reply {
				return memtest.Consolidate(req).WithUsage(1000, 100)
			})
			var logs syncbuf.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			runConsolidator(t, b, srv, log, nil)
			ctx := t.Context()
			const payer = "telegram:ada"
			count, err := usage.Open(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if err := count.Add(ctx, payer, tc.before); err != nil {
				t.Fatal(err)
			}
			if tc.garbage {
				kv, err := b.KV(ctx, usage.Bucket)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := kv.Put(ctx, usage.Key(payer, time.Now()), []byte("not a number")); err != nil {
					t.Fatal(err)
				}
			}
			const key = "telegram:100"
			sessions, err := session.Open(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			seq, err := sessions.Append(ctx, key, &nanofleetv1.TurnRecord{TurnId: "t1", Messages: []*nanofleetv1.ChatMessage{{Role: "user", Content: "FACT: my locker code is 4711."}}}, 0)
			if err != nil {
				t.Fatal(err)
			}
			scope := memory.SessionScope("default", key)
			if err := memory.PublishRequest(ctx, b, &nanofleetv1.ConsolidationRequest{
				SessionKey: key, FromSeq: 1, ToSeq: seq, Scope: scope.Key(), Reason: memory.ReasonBudget, Payer: payer,
			}); err != nil {
				t.Fatal(err)
			}
			memtest.WaitCursor(t, b, key, seq, 10*time.Second)
			docs, err := memory.OpenDocs(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if doc, _, err := docs.Get(ctx, scope); err != nil || !strings.Contains(doc.GetContent(), "locker code is 4711") {
				t.Errorf("memory %q, %v: the consolidation did not commit", doc.GetContent(), err)
			}
			// Acknowledged: the work queue is empty.
			waitQueueEmpty(t, b, 10*time.Second)
			if n := srv.RequestCount(); n != 1 {
				t.Errorf("%d model requests, want 1", n)
			}
			if tc.wantSpent >= 0 {
				bustest.Eventually(t, 10*time.Second, func() error {
					if got, err := count.Spent(ctx, payer); err != nil || got != tc.wantSpent {
						return fmt.Errorf("%s counted %d (%v), want %d", payer, got, err, tc.wantSpent)
					}
					return nil
				})
			}
			if tc.wantLog != "" && !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("log lacks %q:\n%s", tc.wantLog, logs.String())
			}
		})
	}
}
