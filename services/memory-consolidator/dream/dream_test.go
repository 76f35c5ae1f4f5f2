package dream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
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
	return saveDream(out)
}

// saveDream is a save_dream call with args.
func saveDream(args map[string]any) llmtest.Reply {
	data, _ := json.Marshal(args)
	return llmtest.ToolCalls(llmtest.Call("save_dream", string(data)))
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
		return saveDream(map[string]any{"summary": "grew", "memory": huge})
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
// against the server. Dream pulls its fires with bus.Pull, whose debug
// record of a failed fetch this waits for.
func TestRunPausesWhileItsConsumerIsGone(t *testing.T) {
	_, b := memtest.Start(t)
	ctx := t.Context()
	warned := make(chan uint64, 100)
	log := observetest.LogFunc(func(r slog.Record) {
		if r.Level == slog.LevelDebug && r.Message == "fetch failed" {
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

// TestModelAnswers: Dream forces a save_dream call whose schema fits the
// scope; a valid call is applied, a call its schema rejects is unusable
// like an unreadable answer (logged, the scope left as it is, the entries
// dreamed, so the model is not asked again), and a model that answers in
// text anyway is read as the JSON object the prompt describes.
func TestModelAnswers(t *testing.T) {
	const (
		lisbon = "- Ada lives in Lisbon\n"
		soul   = "I am kind.\n"
	)
	tests := []struct {
		name   string
		agent  bool // the agent scope, else ada's user scope
		reply  llmtest.Reply
		memory string // MEMORY.md after the run
		soul   string // SOUL.md after the run (agent scope)
		skill  string // skill "greet" after the run (agent scope)
		// summary is the revision's; "" when the run must store none.
		summary string
		// unusable is in the error logged for an unusable answer; "" when
		// none must be logged.
		unusable string
	}{
		{name: "call applied", agent: true,
			reply:  saveDream(map[string]any{"summary": "Ada moved.", "memory": "- Ada lives in Porto", "user": nil, "soul": "I am kind and brief.", "skills": map[string]any{"greet": "Say hi.", "bad name": "x", "old": nil}}),
			memory: "- Ada lives in Porto\n", soul: "I am kind and brief.\n", skill: "Say hi.\n", summary: "Ada moved."},
		{name: "call without summary gets one", agent: false,
			reply:  saveDream(map[string]any{"memory": "# Facts\n- Ada lives in Lisbon"}),
			memory: "# Facts\n- Ada lives in Lisbon\n", summary: "refined memory from 1 history entries"},
		{name: "call changing nothing", agent: true,
			reply:  saveDream(map[string]any{"summary": "nothing new", "memory": nil, "soul": "  "}),
			memory: lisbon, soul: soul},
		{name: "call with a wrong type", agent: true,
			reply:  saveDream(map[string]any{"summary": "Ada moved.", "memory": map[string]any{"text": "- Ada lives in Porto"}, "soul": "I am brief."}),
			memory: lisbon, soul: soul, unusable: `save_dream: argument "memory"`},
		{name: "call with a skill that is not text", agent: true,
			reply:  saveDream(map[string]any{"summary": "Ada moved.", "memory": "- Ada lives in Porto", "skills": map[string]any{"greet": 3}}),
			memory: lisbon, soul: soul, unusable: `save_dream: argument "skills.greet"`},
		{name: "call with the profile in a user scope", agent: false,
			reply:  saveDream(map[string]any{"summary": "Ada moved.", "memory": "- Ada lives in Porto", "soul": "I am brief."}),
			memory: lisbon, unusable: `save_dream: unknown argument "soul"`},
		{name: "call that is not JSON", agent: false,
			reply:  llmtest.ToolCalls(llmtest.Call("save_dream", `{"memory": "- Ada lives in Porto"`)),
			memory: lisbon, unusable: "save_dream: arguments are not valid JSON"},
		{name: "text answer", agent: true,
			reply:  llmtest.Text(`{"summary": "Ada moved.", "memory": "- Ada lives in Porto", "soul": null, "skills": {"greet": "Say hi."}}`),
			memory: "- Ada lives in Porto\n", soul: soul, skill: "Say hi.\n", summary: "Ada moved."},
		{name: "fenced text with trailing comma", agent: false,
			reply:  llmtest.Text("```json\n{\"summary\": \"Ada moved.\", \"memory\": \"- Ada lives in Porto\",}\n```"),
			memory: "- Ada lives in Porto\n", summary: "Ada moved."},
		{name: "prose", agent: true,
			reply:  llmtest.Text("I am sorry, I cannot help with that."),
			memory: lisbon, soul: soul, unusable: "unusable model answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, b := memtest.Start(t)
			ctx := t.Context()
			model := llmtest.NewServer(t)
			model.Enqueue(tt.reply)
			prof, _ := b.KV(ctx, bus.BucketProfile)
			if _, err := prof.Put(ctx, profile.FileKey("default", "SOUL.md"), []byte(soul)); err != nil {
				t.Fatal(err)
			}
			sc := memory.UserScope("default", "ada")
			if tt.agent {
				sc = memory.AgentScope("default")
			}
			docs, _ := memory.OpenDocs(ctx, b)
			if _, _, err := docs.SetContent(ctx, sc, lisbon, "operator"); err != nil {
				t.Fatal(err)
			}
			if _, err := memory.OpenLog(b).Append(ctx, &nanofleetv1.HistoryEntry{SessionKey: "cli:1", Scope: sc.Key(), FromSeq: 1, ToSeq: 2, Text: "[2026-01-02 10:00] Ada said she moved to Porto."}, 0); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var unusable []string
			log := observetest.LogFunc(func(r slog.Record) {
				if r.Message == "dream: unusable answer; scope left as it is" {
					mu.Lock()
					defer mu.Unlock()
					r.Attrs(func(a slog.Attr) bool {
						if a.Key == "err" {
							unusable = append(unusable, a.Value.String())
						}
						return true
					})
				}
			})
			cfg := dream.DefaultConfig()
			cfg.ID = "c0"
			j, err := dream.New(ctx, cfg, dream.Deps{Bus: b, Model: memtest.Model(t, model)}, dream.WithLogger(log))
			if err != nil {
				t.Fatal(err)
			}
			// The second run finds the entries dreamed, whatever the answer
			// was: one model call.
			revs, err := j.RunOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if again, err := j.RunOnce(ctx); err != nil || len(again) != 0 {
				t.Fatalf("second run: revisions %v, err %v", again, err)
			}
			reqs := model.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d model calls, want 1", len(reqs))
			}
			// The request forces save_dream, with the scope's files as
			// its arguments.
			req := reqs[0]
			choice, _ := json.Marshal(req.ToolChoice)
			if string(choice) != `{"function":{"name":"save_dream"},"type":"function"}` || len(req.Tools) != 1 || req.Tools[0].Function == nil {
				t.Fatalf("tool_choice %s with %d tools, want save_dream forced", choice, len(req.Tools))
			}
			params, _ := json.Marshal(req.Tools[0].Function.Parameters)
			var schema struct {
				Properties           map[string]json.RawMessage `json:"properties"`
				Required             []string                   `json:"required"`
				AdditionalProperties *bool                      `json:"additionalProperties"`
			}
			if err := json.Unmarshal(params, &schema); err != nil {
				t.Fatal(err)
			}
			want := "memory summary"
			if tt.agent {
				want = "memory skills soul summary user"
			}
			if got := strings.Join(slices.Sorted(maps.Keys(schema.Properties)), " "); got != want || len(schema.Required) != 0 ||
				schema.AdditionalProperties == nil || *schema.AdditionalProperties {
				t.Errorf("save_dream parameters %s, want properties %q, none required, no others", params, want)
			}
			if sys := req.Messages[0].Content; strings.Contains(sys, "JSON") || !strings.Contains(sys, "save_dream") {
				t.Errorf("system prompt %q", sys)
			}
			if text := req.LastUserText(); strings.Contains(text, "Return ONLY a JSON") || !strings.Contains(text, "Call the save_dream tool") {
				t.Errorf("prompt:\n%s", text)
			}

			doc, _, _ := docs.Get(ctx, sc)
			if doc.GetContent() != tt.memory {
				t.Errorf("memory %q, want %q", doc.GetContent(), tt.memory)
			}
			if tt.agent {
				if e, err := prof.Get(ctx, profile.FileKey("default", "SOUL.md")); err != nil || string(e.Value()) != tt.soul {
					t.Errorf("soul %v, %v; want %q", e, err, tt.soul)
				}
				if _, err := prof.Get(ctx, profile.FileKey("default", "USER.md")); err == nil {
					t.Error("USER.md written")
				}
				skill := ""
				if e, err := prof.Get(ctx, profile.SkillKey("default", "greet")); err == nil {
					skill = string(e.Value())
				} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
					t.Fatal(err)
				}
				if skill != tt.skill {
					t.Errorf("skill greet %q, want %q", skill, tt.skill)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case tt.unusable == "" && len(unusable) != 0:
				t.Errorf("answer logged unusable: %q", unusable)
			case tt.unusable != "" && (len(unusable) != 1 || !strings.Contains(unusable[0], tt.unusable)):
				t.Errorf("unusable answer logged %q, want one error with %q", unusable, tt.unusable)
			}
			if tt.summary == "" {
				if len(revs) != 0 {
					t.Errorf("revisions %v, want none", revs)
				}
				return
			}
			if len(revs) != 1 {
				t.Fatalf("revisions %v, want one", revs)
			}
			r, err := mustRevisions(t, b).Get(ctx, revs[0])
			if err != nil || r.GetSummary() != tt.summary {
				t.Errorf("revision %v, %v; want summary %q", r, err, tt.summary)
			}
		})
	}
}
