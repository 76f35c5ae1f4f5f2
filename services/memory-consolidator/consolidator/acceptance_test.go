package consolidator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/profile/profiletest"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/worker"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/consolidator"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/memtest"
)

// fleet is a worker with memory and a consolidator on one JetStream and
// one fake model.
type fleet struct {
	b   *bus.Bus
	llm *llmtest.Server
	mem *memory.Store
	out <-chan *nanofleetv1.OutboundMessage
}

type noRunners struct{}

func (noRunners) CachedCatalog(context.Context) ([]*nanofleetv1.ToolDefinition, error) {
	return nil, nil
}
func (noRunners) Call(_ context.Context, r *nanofleetv1.ToolRequest) (*nanofleetv1.ToolResult, error) {
	return nil, fmt.Errorf("no runner for %s", r.GetName())
}

// startFleet runs a worker whose prompt budget is budget tokens, with
// memory in scope, and a consolidator. The model consolidates with
// memtest.Consolidate and answers turns with "ok".
func startFleet(t *testing.T, scope string, budget int) *fleet {
	return startFleetWith(t, scope, budget, memtest.Consolidate)
}

// startFleetWith is startFleet with another consolidation model, and the
// worker's config changed by edits.
func startFleetWith(t *testing.T, scope string, budget int, consolidate llmtest.Script, edits ...func(*worker.Config)) *fleet {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	_, b := memtest.Start(t)
	srv := llmtest.NewServer(t)
	srv.Handle(func(req *llmtest.RecordedRequest) llmtest.Reply {
		if memtest.IsConsolidation(req) {
			return consolidate(req)
		}
		return llmtest.Text("ok, noted.")
	})
	model := memtest.Model(t, srv)
	log := memtest.Logger(t)
	mem, err := memory.New(ctx, memory.Config{Scope: scope}, b, memory.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	profiles := profiletest.Watch(ctx, t, b)
	cfg := worker.DefaultConfig()
	cfg.ID = "w1"
	cfg.Model = "test-model"
	cfg.LeaseTTL = bustest.TestLayout().LeaseTTL
	cfg.AckWait = config.Seconds(3 * time.Second)
	cfg.ShutdownGrace = config.Seconds(5 * time.Second)
	cfg.Loop.MaxTokens = 200
	cfg.ContextWindowTokens = budget + cfg.Loop.MaxTokens
	for _, edit := range edits {
		edit(&cfg)
	}
	w, err := worker.New(ctx, cfg, worker.Deps{
		Bus: b, Model: model, Tools: noRunners{}, Profiles: profiles, Memory: mem,
		Local: mem.Tools(), Commands: mem.Commands(),
	}, worker.WithLogger(log.With("part", "worker")))
	if err != nil {
		t.Fatal(err)
	}
	cc := consolidator.DefaultConfig()
	cc.ID = "c1"
	c, err := consolidator.New(ctx, cc, consolidator.Deps{Bus: b, Model: model}, consolidator.WithLogger(log.With("part", "consolidator")))
	if err != nil {
		t.Fatal(err)
	}
	stopW := svctest.Run(t, w.Run)
	stopC := svctest.Run(t, c.Run)
	out, stopOut := bustest.Outbound(t, b, 100)
	f := &fleet{b: b, llm: srv, mem: mem, out: out}
	t.Cleanup(func() {
		stopOut()
		cancel()
		_, _ = stopW(), stopC()
		profiles.Stop()
	})
	return f
}

// say sends text from sender in a chat and waits for the reply.
func (f *fleet) say(t *testing.T, channel, chat, sender, id, text string) *nanofleetv1.OutboundMessage {
	t.Helper()
	return f.send(t, &nanofleetv1.InboundMessage{Id: id, Channel: channel, ChatId: chat, SenderId: sender, Content: text})
}

// send publishes in and waits for the reply.
func (f *fleet) send(t *testing.T, in *nanofleetv1.InboundMessage) *nanofleetv1.OutboundMessage {
	t.Helper()
	channel, id, text := in.GetChannel(), in.GetId(), in.GetContent()
	data, _ := proto.Marshal(in)
	m := nats.NewMsg(f.b.Space.Inbound(channel, in.GetChatId()))
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, channel+":"+id)
	if _, err := f.b.JS.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-f.out:
		if o.GetReplyTo() != id {
			t.Fatalf("reply to %q, want %q: %v", o.GetReplyTo(), id, o)
		}
		return o
	case <-time.After(15 * time.Second):
		t.Fatalf("no reply to %q within 15s", text)
		return nil
	}
}

func TestSixtyTurnsConsolidateAndKeepEveryFact(t *testing.T) {
	f := startFleet(t, memory.KindAgent, 600)
	ctx := t.Context()
	const chat = "c1"
	key := session.Key("cli", chat)
	// Watch the requests the worker publishes.
	asked := make(chan *nanofleetv1.ConsolidationRequest, 1000)
	sub, err := f.b.NC.Subscribe(f.b.Space.Consolidate(key), func(m *nats.Msg) {
		r := &nanofleetv1.ConsolidationRequest{}
		if proto.Unmarshal(m.Data, r) == nil {
			asked <- r
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	filler := strings.Repeat("and some more words about the day ", 3)
	f.say(t, "cli", chat, "ada", "1", "T001: Hello! FACT: my name is Ada. FACT: my cat is called Miso. FACT: I live in Lisbon. "+filler)
	for i := 2; i <= 61; i++ {
		f.say(t, "cli", chat, "ada", fmt.Sprint(i), fmt.Sprintf("T%03d: just chatting, %s", i, filler))
	}
	// Several requests in 60 turns, each waited for (the subscription
	// hands them over on a goroutine of its own), then those already here.
	var upTo uint64
	for n := 0; n < 3 || len(asked) > 0; n++ {
		select {
		case r := <-asked:
			upTo = max(upTo, r.GetToSeq())
		case <-time.After(20 * time.Second):
			t.Fatalf("%d consolidation requests in 60 turns, want several", n)
		}
	}
	memtest.WaitCursor(t, f.b, key, upTo, 20*time.Second)
	// The model sees the facts, though turn 1 left the history long ago.
	f.say(t, "cli", chat, "ada", "62", "T062: what is my cat called?")
	// The turn's request, not the last one: a consolidation the turns
	// before asked for may still call the model.
	req := turnRequest(t, f.llm, "T062:")
	if sys := req.Messages[0].Content; !strings.Contains(sys, "# Memory") || !strings.Contains(sys, "my cat is called Miso") {
		t.Errorf("prompt after consolidation lacks the memory:\n%s", sys)
	}
	for _, m := range req.Messages[1:] {
		if strings.Contains(m.Content, "T001:") {
			t.Errorf("turn 1 is still in the prompt's history")
		}
	}
	turns, err := memory.ReadTurns(ctx, f.b, key, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A turn asks for consolidation after it has let its session go, and
	// only when no request of the session is outstanding, so the request
	// that takes the cursor past turn 41 may come after turn 61's reply,
	// or from turn 62: wait for it rather than read the cursor once.
	memtest.WaitCursor(t, f.b, key, turns[40].Seq, 20*time.Second)

	sessions, _ := session.Open(ctx, f.b)
	info, _, _ := sessions.Info(ctx, key)
	entries := memtest.Coverage(t, f.b, key)
	if len(entries) < 3 {
		t.Fatalf("%d consolidations in 60 turns, want several:\n%s", len(entries), memtest.Describe(entries))
	}
	// Each consolidated turn is in exactly one entry, none is lost.
	for _, tr := range turns {
		if tr.Seq > info.GetConsolidatedSeq() {
			break
		}
		marker := strings.SplitN(tr.Record.GetMessages()[0].GetContent(), ":", 2)[0] + ":"
		if n := memtest.Count(entries, marker); n != 1 {
			t.Errorf("turn %s (seq %d) is in %d entries, want 1", marker, tr.Seq, n)
		}
	}
	if info.GetConsolidatedSeq() < turns[40].Seq {
		t.Errorf("cursor %d is behind turn 41 (seq %d)", info.GetConsolidatedSeq(), turns[40].Seq)
	}
	// Every fact of turn 1 is in memory or the log.
	docs, _ := memory.OpenDocs(ctx, f.b)
	doc, _, _ := docs.Get(ctx, memory.AgentScope("default"))
	for _, fact := range []string{"my name is Ada", "my cat is called Miso", "I live in Lisbon"} {
		if !strings.Contains(doc.GetContent(), fact) && memtest.Count(entries, fact) == 0 {
			t.Errorf("fact %q lost: memory %q", fact, doc.GetContent())
		}
	}
}

func TestPerUserScopeNeverMixesUsers(t *testing.T) {
	f := startFleet(t, memory.KindUser, 4000)
	ctx := t.Context()
	// Ada writes on Telegram and on Slack; linked, she is one person.
	if err := f.mem.Links().Link(ctx, "telegram", "100", "ada"); err != nil {
		t.Fatal(err)
	}
	if err := f.mem.Links().Link(ctx, "slack", "U100", "ada"); err != nil {
		t.Fatal(err)
	}
	f.say(t, "telegram", "100", "100", "a1", "FACT: my locker code is 4711. Remember it.")
	f.say(t, "telegram", "200", "200", "b1", "FACT: my favourite colour is teal. Remember it.")
	// /new archives each conversation into its user's memory.
	f.say(t, "telegram", "100", "100", "a2", "/new")
	f.say(t, "telegram", "200", "200", "b2", "/new")
	for _, key := range []string{"telegram:100", "telegram:200"} {
		turns, err := memory.ReadTurns(ctx, f.b, key, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		memtest.WaitCursor(t, f.b, key, turns[0].Seq, 15*time.Second)
	}
	before := len(f.llm.Requests())
	f.say(t, "telegram", "100", "100", "a3", "What do you remember about me?")
	f.say(t, "slack", "D1", "U100", "a4", "And here on Slack?")
	f.say(t, "telegram", "200", "200", "b3", "What do you remember about me?")
	reqs := f.llm.Requests()[before:]
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	check := func(req llmtest.RecordedRequest, want, dont string) {
		t.Helper()
		var all strings.Builder
		for _, m := range req.Messages {
			all.WriteString(llmtest.MessageText(m) + "\n")
		}
		if !strings.Contains(all.String(), want) {
			t.Errorf("request for %q lacks %q:\n%s", req.LastUserText(), want, all.String())
		}
		if strings.Contains(all.String(), dont) {
			t.Errorf("request for %q leaks %q:\n%s", req.LastUserText(), dont, all.String())
		}
	}
	check(reqs[0], "locker code is 4711", "teal")
	check(reqs[1], "locker code is 4711", "teal")
	check(reqs[2], "favourite colour is teal", "4711")
	// Nor do the prompts' memory texts mix, as the worker asks for them.
	for _, tc := range []struct {
		in         *nanofleetv1.InboundMessage
		want, dont string
	}{
		{&nanofleetv1.InboundMessage{Channel: "telegram", ChatId: "100", SenderId: "100"}, "4711", "teal"},
		{&nanofleetv1.InboundMessage{Channel: "telegram", ChatId: "200", SenderId: "200"}, "teal", "4711"},
		{&nanofleetv1.InboundMessage{Channel: "telegram", ChatId: "-5", SenderId: "100", Metadata: map[string]string{"chat_type": "group"}}, "", "4711"},
	} {
		text, err := f.mem.Context(ctx, tc.in, tc.in.Channel+":"+tc.in.ChatId)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text, tc.want) || strings.Contains(text, tc.dont) {
			t.Errorf("Context(%s:%s) = %q", tc.in.Channel, tc.in.ChatId, text)
		}
	}
	// The memory_search tool searches the asker's log only.
	hits, err := f.mem.Search(ctx, &nanofleetv1.InboundMessage{Channel: "telegram", SenderId: "200"}, "telegram:200", "locker", 5)
	if err != nil || len(hits) != 0 {
		t.Errorf("user 200 found user 100's entries: %v, %v", hits, err)
	}
}

// turnRequest is the newest model request of the turn whose user message
// contains text.
func turnRequest(t *testing.T, s *llmtest.Server, text string) llmtest.RecordedRequest {
	t.Helper()
	reqs := s.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if strings.Contains(reqs[i].LastUserText(), text) {
			return reqs[i]
		}
	}
	t.Fatalf("no model request of the turn %q", text)
	return llmtest.RecordedRequest{}
}
