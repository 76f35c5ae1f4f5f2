package dream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/agenttool"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/observe/observetest"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/dream"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/memtest"
)

// dreamer is a Dream model: the agent scope learns that Ada moved to Porto
// and gets a briefer soul; a user scope's memory gets a heading.
func dreamer(req *llmtest.RecordedRequest) llmtest.Reply {
	if !memtest.IsDream(req) {
		return llmtest.Text("?")
	}
	var out map[string]any
	if strings.Contains(req.LastUserText(), "## SOUL.md") {
		out = map[string]any{"summary": "Ada moved to Porto; soul made briefer.", "memory": "- Ada lives in Porto", "soul": "I am kind and brief.", "user": nil, "skills": map[string]any{}}
	} else {
		mem := memtest.Between(req.LastUserText(), "## MEMORY.md\n", "\n")
		out = map[string]any{"summary": "organised", "memory": "# Facts\n" + mem}
	}
	data, _ := json.Marshal(out)
	return llmtest.Text(string(data))
}

func TestDreamRunsOnScheduleAndRestores(t *testing.T) {
	srv, b := memtest.Start(t)
	b2 := srv.Connect(t, "")
	ctx := t.Context()
	model := llmtest.NewServer(t)
	model.Handle(dreamer)
	prof, _ := b.KV(ctx, bus.BucketProfile)
	if _, err := prof.Put(ctx, profile.FileKey("default", "SOUL.md"), []byte("I am kind.\n")); err != nil {
		t.Fatal(err)
	}
	docs, _ := memory.OpenDocs(ctx, b)
	agent, ada := memory.AgentScope("default"), memory.UserScope("default", "ada")
	if _, _, err := docs.SetContent(ctx, agent, "- Ada lives in Lisbon\n", "operator"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := docs.SetContent(ctx, ada, "- likes tea", "operator"); err != nil {
		t.Fatal(err)
	}
	log := memory.OpenLog(b)
	for i, e := range []*nanofleetv1.HistoryEntry{
		{SessionKey: "cli:1", Scope: agent.Key(), FromSeq: 1, ToSeq: 3, Text: "[2026-01-02 10:00] Ada said she moved to Porto."},
		{SessionKey: "tg:7", Scope: ada.Key(), FromSeq: 1, ToSeq: 2, Text: "[2026-01-02 11:00] Ada asked about tea shops."},
	} {
		if _, err := log.Append(ctx, e, 0); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	revs := memtest.Messages(t, b, memory.NamesOf(b.Space).RevisionStream(), memory.NamesOf(b.Space).RevisionAll())

	// Two consolidators run Dream; each fire runs once.
	ran := make(chan error, 100)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var jobs []*dream.Job
	for i, bb := range []*bus.Bus{b, b2} {
		cfg := dream.DefaultConfig()
		cfg.ID, cfg.Every = fmt.Sprint("c", i), "1s"
		j, err := dream.New(ctx, cfg, dream.Deps{Bus: bb, Model: memtest.Model(t, model),
			Ran: func(_ []uint64, err error) { ran <- err }}, dream.WithLogger(memtest.Logger(t).With("c", i)))
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
		wg.Go(func() { _ = j.Run(runCtx) })
	}

	// The first fire refines both scopes: one revision each.
	got := map[string]uint64{}
	for range 2 {
		m := memtest.Next(t, revs, 10*time.Second, "dream revision")
		md, _ := m.Metadata()
		r, err := mustRevisions(t, b).Get(ctx, md.Sequence.Stream)
		if err != nil {
			t.Fatal(err)
		}
		got[r.GetScope()] = r.Seq
	}
	if got[agent.Key()] == 0 || got[ada.Key()] == 0 {
		t.Fatalf("revisions by scope = %v", got)
	}
	doc, _, _ := docs.Get(ctx, agent)
	soul, _ := prof.Get(ctx, profile.FileKey("default", "SOUL.md"))
	if doc.GetContent() != "- Ada lives in Porto\n" || string(soul.Value()) != "I am kind and brief.\n" {
		t.Fatalf("after dream: memory %q, soul %q", doc.GetContent(), soul.Value())
	}
	adaDoc, _, _ := docs.Get(ctx, ada)
	if adaDoc.GetContent() != "# Facts\n- likes tea\n" {
		t.Errorf("ada's memory after dream: %q", adaDoc.GetContent())
	}
	// Later fires find nothing new: no more model calls, whoever runs them.
	for range 3 {
		select {
		case err := <-ran:
			if err != nil {
				t.Fatalf("dream run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("dream did not run again")
		}
	}
	var dreams []llmtest.RecordedRequest
	for _, r := range model.Requests() {
		if memtest.IsDream(&r) {
			dreams = append(dreams, r)
		}
	}
	if len(dreams) != 2 {
		t.Fatalf("%d dream model calls, want 2 (one per scope)", len(dreams))
	}
	for _, r := range dreams {
		text := r.LastUserText()
		if strings.Contains(text, "tea shops") && (strings.Contains(text, "SOUL.md") || strings.Contains(text, "Porto")) {
			t.Errorf("ada's dream saw the agent's files or entries:\n%s", text)
		}
	}

	// /dream-log lists it, /dream-restore undoes it.
	st, err := memory.New(ctx, memory.Config{}, b)
	if err != nil {
		t.Fatal(err)
	}
	tc := &agenttool.TurnContext{SessionKey: "cli:1", Inbound: &nanofleetv1.InboundMessage{Channel: "cli", ChatId: "1", SenderId: "ada"}}
	cmds := st.Commands()
	out, err := cmds[0].Run(ctx, tc, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("#%d", got[agent.Key()]), "Ada moved to Porto", "MEMORY.md +1 −1", "SOUL.md +1 −1", "@every 1s", "not deleted"} {
		if !strings.Contains(out, want) {
			t.Errorf("/dream-log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, fmt.Sprintf("#%d ", got[ada.Key()])) {
		t.Errorf("/dream-log of the agent scope shows ada's revision:\n%s", out)
	}
	out, err = cmds[1].Run(ctx, tc, []string{fmt.Sprint(got[agent.Key()])})
	if err != nil || !strings.Contains(out, "Restored MEMORY.md, SOUL.md") {
		t.Fatalf("/dream-restore = %q, %v", out, err)
	}
	doc, _, _ = docs.Get(ctx, agent)
	soul, _ = prof.Get(ctx, profile.FileKey("default", "SOUL.md"))
	if doc.GetContent() != "- Ada lives in Lisbon\n" || string(soul.Value()) != "I am kind.\n" {
		t.Fatalf("after restore: memory %q, soul %q", doc.GetContent(), soul.Value())
	}
	// Another scope's revision cannot be restored from here.
	out, _ = cmds[1].Run(ctx, tc, []string{fmt.Sprint(got[ada.Key()])})
	if !strings.Contains(out, "no revision") {
		t.Errorf("restoring ada's revision from the agent scope: %q", out)
	}

	// The job is listed, and comes back when deleted.
	listed, err := memory.ListJobs(ctx, b)
	if err != nil || len(listed) != 1 || listed[0].Name != "dream" || listed[0].Schedule != "@every 1s" {
		t.Fatalf("jobs = %v, %v", listed, err)
	}
	js, _ := b.JS.Stream(ctx, memory.NamesOf(b.Space).JobStream())
	sched, _ := js.GetLastMsgForSubject(ctx, memory.NamesOf(b.Space).JobSchedule("dream", "default"))
	if err := js.DeleteMsg(ctx, sched.Sequence); err == nil {
		t.Error("deleting the schedule message succeeded")
	}
	if err := js.Purge(ctx, jetstream.WithPurgeSubject(memory.NamesOf(b.Space).JobSchedule("dream", "default"))); err != nil {
		t.Fatal(err)
	}
	if err := jobs[0].Schedule(ctx); err != nil {
		t.Fatal(err)
	}
	if listed, _ := memory.ListJobs(ctx, b); len(listed) != 1 {
		t.Errorf("schedule not re-created: %v", listed)
	}
}

func mustRevisions(t *testing.T, b *bus.Bus) *memory.Revisions {
	t.Helper()
	r, err := memory.OpenRevisions(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*dream.Config)
		ok   bool
	}{
		{"default", func(*dream.Config) {}, true},
		{"sub-second", func(c *dream.Config) { c.Every = "500ms" }, false},
		{"not a duration", func(c *dream.Config) { c.Every = "soon" }, false},
		{"cron with zone", func(c *dream.Config) { c.Cron, c.TimeZone = "0 0 3 * * *", "Europe/Lisbon" }, true},
		{"zone without cron", func(c *dream.Config) { c.TimeZone = "Europe/Lisbon" }, false},
		{"unknown zone", func(c *dream.Config) { c.Cron, c.TimeZone = "@daily", "Mars/Olympus" }, false},
	}
	for _, tt := range tests {
		c := dream.DefaultConfig()
		c.ID = "x"
		tt.edit(&c)
		if err := c.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	c := dream.DefaultConfig()
	if c.Pattern() != "@every 2h0m0s" {
		t.Errorf("default pattern %q", c.Pattern())
	}
}

// TestOversizedAnswerIsNotRetried: a Dream answer whose revision the bus
// cannot store (a MEMORY.md over the server's 8 MiB payload) would fail
// the same way at every fire, each asking the model again. It is unusable:
// memory stays as it was and the entries count as dreamed.
func TestOversizedAnswerIsNotRetried(t *testing.T) {
	_, b := memtest.Start(t)
	ctx := t.Context()
	model := llmtest.NewServer(t)
	huge := strings.Repeat("- a fact\n", (9<<20)/9)
	model.Handle(func(req *llmtest.RecordedRequest) llmtest.Reply {
		data, _ := json.Marshal(map[string]any{"summary": "grew", "memory": huge})
		return llmtest.Text(string(data))
	})
	docs, _ := memory.OpenDocs(ctx, b)
	agent := memory.AgentScope("default")
	if _, _, err := docs.SetContent(ctx, agent, "- Ada lives in Lisbon\n", "operator"); err != nil {
		t.Fatal(err)
	}
	if _, err := memory.OpenLog(b).Append(ctx, &nanofleetv1.HistoryEntry{SessionKey: "cli:1", Scope: agent.Key(), FromSeq: 1, ToSeq: 2, Text: "Ada talked a lot."}, 0); err != nil {
		t.Fatal(err)
	}
	cfg := dream.DefaultConfig()
	cfg.ID = "c0"
	j, err := dream.New(ctx, cfg, dream.Deps{Bus: b, Model: memtest.Model(t, model)}, dream.WithLogger(memtest.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		revs, err := j.RunOnce(ctx)
		if err != nil || len(revs) != 0 {
			t.Fatalf("run %d: revisions %v, err %v; want none and no error", run, revs, err)
		}
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("%d model calls, want 1: the second run must find the entries dreamed", n)
	}
	if doc, _, _ := docs.Get(ctx, agent); doc.GetContent() != "- Ada lives in Lisbon\n" {
		t.Errorf("memory changed to %d bytes", len(doc.GetContent()))
	}
}

// TestRunPausesWhileItsConsumerIsGone: a fetch of fires that the server
// ends at once (the consumer deleted, or without a leader while one is
// elected) is logged and waited on, not tried again at once, which spun
// against the server.
func TestRunPausesWhileItsConsumerIsGone(t *testing.T) {
	_, b := memtest.Start(t)
	ctx := t.Context()
	warned := make(chan uint64, 100)
	log := observetest.LogFunc(func(r slog.Record) {
		if r.Level == slog.LevelDebug && r.Message == "fetch dream fire failed" {
			select {
			case warned <- b.NC.Stats().OutMsgs:
			default:
			}
		}
	})
	cfg := dream.DefaultConfig()
	cfg.ID = "c0"
	j, err := dream.New(ctx, cfg, dream.Deps{Bus: b, Model: memtest.Model(t, llmtest.NewServer(t))}, dream.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	stop := svctest.Run(t, j.Run, svctest.StopWithin(10*time.Second))
	if err := b.JS.DeleteConsumer(ctx, memory.NamesOf(b.Space).JobStream(), "dream_default"); err != nil {
		t.Fatal(err)
	}
	first := bustest.Receive(t, warned, 10*time.Second)
	third := first
	for range 2 {
		third = bustest.Receive(t, warned, 10*time.Second)
	}
	// Two failed fetches between the first warning and the third: a
	// request each, and nothing else is published on this connection.
	if sent := third - first; sent > 4 {
		t.Errorf("%d messages sent between three failed fetches, want at most 4", sent)
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}
