package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/profile/profiletest"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/worker"
)

// noRunners is a fleet without tool runners: an empty catalog. The fleet
// tests in services/nanofleet run turns through real tool runners.
type noRunners struct{}

func (noRunners) CachedCatalog(context.Context) ([]*nanofleetv1.ToolDefinition, error) {
	return nil, nil
}
func (noRunners) Call(_ context.Context, r *nanofleetv1.ToolRequest) (*nanofleetv1.ToolResult, error) {
	return nil, fmt.Errorf("no runner for %s", r.GetName())
}

type harness struct {
	w   *worker.Worker
	b   *bus.Bus
	llm *llmtest.Server
	out <-chan *nanofleetv1.OutboundMessage
}

func start(t *testing.T, opts ...llmtest.Option) *harness {
	t.Helper()
	b := bustest.StartJetStream(t)
	return startOn(t, b, "w1", opts...)
}

func startOn(t *testing.T, b *bus.Bus, id string, opts ...llmtest.Option) *harness {
	t.Helper()
	h, _ := startWith(t, b, id, 5*time.Second, opts...)
	return h
}

// startWith starts a worker with the given shutdown grace and returns a
// func that stops it and waits until it has.
func startWith(t *testing.T, b *bus.Bus, id string, grace time.Duration, opts ...llmtest.Option) (*harness, func()) {
	t.Helper()
	return startEdited(t, b, id, grace, edits{}, opts...)
}

// edits changes what startEdited builds; a nil func changes nothing.
type edits struct {
	config func(*worker.Config)
	deps   func(*worker.Deps)
	before func(*worker.Worker) // called before Run
}

// startEdited is startWith with e applied to the worker's config, its
// dependencies and the worker before it runs.
func startEdited(t *testing.T, b *bus.Bus, id string, grace time.Duration, e edits, opts ...llmtest.Option) (*harness, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	srv := llmtest.NewServer(t, opts...)
	model, err := llm.New(llm.Config{Name: "openai", APIBase: srv.URL(), APIKey: "k", Model: "test-model", MaxRetries: 2},
		llm.WithSleep(func(context.Context, time.Duration) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	// Ready, as the agent-worker waits for it: a /skill handled before the
	// cache held the bucket listed only the skills loaded so far (CI).
	profiles := profiletest.Ready(ctx, t, b)
	cfg := worker.DefaultConfig()
	cfg.ID = id
	cfg.Model = "test-model"
	cfg.LeaseTTL = bustest.TestLayout().LeaseTTL
	cfg.AckWait = config.Seconds(3 * time.Second)
	cfg.ShutdownGrace = config.Seconds(grace)
	if e.config != nil {
		e.config(&cfg)
	}
	deps := worker.Deps{
		Bus: b, Model: model, Tools: noRunners{}, Profiles: profiles,
		Local: []worker.LocalTool{worker.MessageTool{AllowTo: cfg.MessageAllowTo}},
	}
	if e.deps != nil {
		e.deps(&deps)
	}
	w, err := worker.New(ctx, cfg, deps, worker.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	if err != nil {
		t.Fatal(err)
	}
	if e.before != nil {
		e.before(w)
	}
	stopRun := svctest.Run(t, w.Run, svctest.StopWithin(grace+30*time.Second))
	out, stopOut := bustest.Outbound(t, b, 1000)
	h := &harness{w: w, b: b, llm: srv, out: out}
	stop := sync.OnceFunc(func() { stopOut(); cancel(); _ = stopRun(); profiles.Stop() })
	t.Cleanup(stop)
	return h, stop
}

func (h *harness) send(t *testing.T, chat, id, text string) {
	t.Helper()
	send(t, h.b, chat, id, text)
}

// send publishes an inbound message as the channel-gateway does.
func send(t *testing.T, b *bus.Bus, chat, id, text string) {
	t.Helper()
	sendFrom(t, b, chat, id, "u", text)
}

// sendAs publishes a message from the given sender.
func sendAs(t *testing.T, h *harness, chat, id, sender, text string) {
	t.Helper()
	sendFrom(t, h.b, chat, id, sender, text)
}

// sendFrom publishes a message from the given sender and returns its
// inbound stream sequence.
func sendFrom(t *testing.T, b *bus.Bus, chat, id, sender, text string) uint64 {
	t.Helper()
	in := &nanofleetv1.InboundMessage{Id: id, Channel: "cli", ChatId: chat, SenderId: sender, Content: text}
	data, _ := proto.Marshal(in)
	m := nats.NewMsg(b.Space.Inbound("cli", chat))
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, "cli:"+id)
	ack, err := b.JS.PublishMsg(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

func (h *harness) next(t *testing.T) *nanofleetv1.OutboundMessage {
	t.Helper()
	select {
	case o := <-h.out:
		return o
	case <-time.After(15 * time.Second):
		t.Fatal("no reply within 15s")
		return nil
	}
}

func TestTurnPersistsHistory(t *testing.T) {
	h := start(t)
	h.llm.Enqueue(llmtest.Text("Nice to meet you, Ada."), llmtest.Text("Your name is Ada."))
	h.send(t, "c1", "1", "My name is Ada.")
	if o := h.next(t); o.GetContent() != "Nice to meet you, Ada." || o.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL || o.GetReplyTo() != "1" {
		t.Fatalf("first reply = %v", o)
	}
	h.send(t, "c1", "2", "What is my name?")
	if o := h.next(t); o.GetContent() != "Your name is Ada." {
		t.Fatalf("second reply = %v", o)
	}
	req, _ := h.llm.LastRequest()
	var seen []string
	for _, m := range req.Messages {
		seen = append(seen, m.Role+":"+m.Content)
	}
	joined := strings.Join(seen, "|")
	if !strings.Contains(joined, "user:My name is Ada.|assistant:Nice to meet you, Ada.|user:What is my name?") {
		t.Errorf("second turn did not see the first: %s", joined)
	}
	s, _ := session.Open(t.Context(), h.b)
	hist, err := s.LoadHistory(t.Context(), "cli:c1", 0)
	if err != nil || len(hist.Turns) != 2 {
		t.Fatalf("history = %d turns, %v", len(hist.Turns), err)
	}
}

func TestDuplicatePublishYieldsOneReply(t *testing.T) {
	h := start(t)
	h.send(t, "c1", "same", "hello")
	h.send(t, "c1", "same", "hello")
	h.send(t, "c1", "other", "second")
	a, b := h.next(t), h.next(t)
	if a.GetReplyTo() != "same" || b.GetReplyTo() != "other" {
		t.Fatalf("replies to %q then %q", a.GetReplyTo(), b.GetReplyTo())
	}
	// Replies of a chat come in its order: a late second reply to "same"
	// would come before the next message's.
	h.send(t, "c1", "last", "third")
	if c := h.next(t); c.GetReplyTo() != "last" {
		t.Fatalf("extra reply %v", c)
	}
}

func TestMalformedEnvelopeIsDeadLettered(t *testing.T) {
	h := start(t)
	dlq := make(chan *nats.Msg, 1)
	sub, err := h.b.NC.ChanSubscribe(h.b.Space.DeadLetter("inbound"), dlq)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if _, err := h.b.JS.Publish(t.Context(), h.b.Space.Inbound("cli", "bad"), []byte{0xff, 0xff, 0x01}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-dlq:
		if r := m.Header.Get("Nanofleet-Reason"); !strings.Contains(r, "malformed InboundMessage") {
			t.Errorf("reason = %q", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no dead letter")
	}
	h.send(t, "c2", "1", "still there?")
	if o := h.next(t); o.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL {
		t.Fatalf("worker stopped serving: %v", o)
	}
}

// TestModelFailingGivesErrorReply: a turn the model fails is answered
// with an error that says whether trying again may help, and the session
// stays usable.
func TestModelFailingGivesErrorReply(t *testing.T) {
	tests := []struct {
		name   string
		status int
		calls  int
		next   string
	}{
		{"server error, retried", 500, 3, "Please try again in a moment."},
		{"key refused, not retried", 401, 1, "Trying again will not help until that is fixed."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, llmtest.WithFailures(tt.calls, tt.status))
			h.send(t, "c1", "1", "hello")
			o := h.next(t)
			if o.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR || !strings.Contains(o.GetContent(), "could not get an answer from the model") ||
				!strings.HasSuffix(o.GetContent(), tt.next) {
				t.Fatalf("reply = %v, want an error ending %q", o, tt.next)
			}
			if n := h.llm.RequestCount(); n != tt.calls {
				t.Errorf("model called %d times, want %d", n, tt.calls)
			}
			h.send(t, "c1", "2", "again")
			if o := h.next(t); o.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL {
				t.Fatalf("after failure: %v", o)
			}
		})
	}
}

func TestOrderPerSession(t *testing.T) {
	h := start(t, llmtest.WithLatency(5*time.Millisecond))
	const sessions, perSession = 8, 6
	var mu sync.Mutex
	seen := map[string][]string{}
	h.llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		text := r.LastUserText()
		chat, _, _ := strings.Cut(text, "/")
		mu.Lock()
		seen[chat] = append(seen[chat], text)
		mu.Unlock()
		return llmtest.Text("ok " + text)
	})
	for i := range perSession {
		for s := range sessions {
			h.send(t, fmt.Sprint("s", s), fmt.Sprintf("s%d-%d", s, i), fmt.Sprintf("s%d/%d", s, i))
		}
	}
	replies := map[string]int{}
	for range sessions * perSession {
		replies[h.next(t).GetReplyTo()]++
	}
	for id, n := range replies {
		if n != 1 {
			t.Errorf("message %s got %d replies", id, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for s := range sessions {
		chat := fmt.Sprint("s", s)
		for i, text := range seen[chat] {
			if want := fmt.Sprintf("s%d/%d", s, i); text != want {
				t.Fatalf("session %s: model saw %q at position %d, want %q (order %v)", chat, text, i, want, seen[chat])
			}
		}
	}
}

// TestSkillCommand: /skill lists the agent's skills as the prompt offers
// them, and those this worker lacks a requirement for apart; nanobot's
// /skill was sent to the model as text.
func TestSkillCommand(t *testing.T) {
	b := bustest.StartJetStream(t)
	kv, err := b.KV(t.Context(), bus.BucketProfile)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"weather": "---\nname: weather\ndescription: Get the weather forecast\n---\nUse wttr.in\n",
		"tidy":    "---\nname: tidy\ndescription: Keep notes tidy\nalways: true\n---\nTidy up.\n",
		"radio":   "---\nname: radio\ndescription: Tune the radio\nrequires:\n  bins: [no-such-program-here]\n---\nTune.\n",
	} {
		if _, err := kv.Put(t.Context(), profile.SkillKey(profile.DefaultAgent, name), []byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	h := startOn(t, b, "w1")
	h.send(t, "c1", "1", "/skill")
	want := "Skills:\n- tidy: Keep notes tidy (always on)\n- weather: Get the weather forecast\n\n" +
		"Not available (a program or environment variable they need is missing):\n- radio: Tune the radio"
	if o := h.next(t); o.GetContent() != want {
		t.Errorf("/skill = %q, want %q", o.GetContent(), want)
	}
	if n := h.llm.RequestCount(); n != 0 {
		t.Errorf("the model was asked %d times", n)
	}
}

func TestSlashCommands(t *testing.T) {
	h := start(t)
	h.llm.Enqueue(llmtest.Text("remembered").WithUsage(50, 5).WithTokenDetails(20, 1))
	h.send(t, "c1", "1", "remember x")
	h.next(t)
	h.send(t, "c1", "2", "/help")
	if o := h.next(t); !strings.Contains(o.GetContent(), "/new") {
		t.Errorf("/help = %q", o.GetContent())
	}
	h.send(t, "c1", "3", "/model other-model")
	h.next(t)
	h.send(t, "c1", "4", "/status")
	if o := h.next(t); !strings.Contains(o.GetContent(), "other-model") ||
		!strings.Contains(o.GetContent(), "Messages in context: 2 messages (1 turn)") ||
		!strings.Contains(o.GetContent(), "Tokens: 50 in (20 cached), 5 out (1 reasoning), over 1 model call in 1 turn") {
		t.Errorf("/status = %q", o.GetContent())
	}
	h.send(t, "c1", "4h", "/history 1")
	if o := h.next(t); o.GetContent() != "assistant: remembered" {
		t.Errorf("/history 1 = %q", o.GetContent())
	}
	h.send(t, "c1", "4r", "/restart")
	if o := h.next(t); !strings.HasPrefix(o.GetContent(), "/restart is nanobot's") {
		t.Errorf("/restart = %q, want it answered without the model", o.GetContent())
	}
	h.send(t, "c1", "4u", "/history abc")
	if o := h.next(t); !strings.HasPrefix(o.GetContent(), "Usage: /history [n]") {
		t.Errorf("/history abc = %q, want the usage", o.GetContent())
	}
	h.send(t, "c1", "5", "/new")
	if o := h.next(t); o.GetContent() != "New session started." {
		t.Errorf("/new = %q", o.GetContent())
	}
	h.send(t, "c1", "6", "hello again")
	h.next(t)
	req, _ := h.llm.LastRequest()
	if req.Model != "other-model" {
		t.Errorf("model after /model = %q", req.Model)
	}
	for _, m := range req.Messages {
		if strings.Contains(m.Content, "remember x") {
			t.Error("history before /new reached the model")
		}
	}
}

func TestStopEndsLongTurn(t *testing.T) {
	h := start(t)
	// The model would answer after 5 minutes; next waits 15 s, so only a
	// stop that cuts the call short gets the turn answered in time.
	h.llm.Enqueue(llmtest.Text("too late").WithLatency(5 * time.Minute))
	h.send(t, "c1", "1", "think hard")
	waitForModelRequest(t, h)
	h.send(t, "c1", "2", "/stop")
	a := h.next(t)
	if a.GetReplyTo() != "1" || !strings.Contains(a.GetContent(), "Stopped") {
		t.Fatalf("stopped turn reply = %v", a)
	}
	if b := h.next(t); b.GetReplyTo() != "2" {
		t.Fatalf("/stop reply = %v", b)
	}
	h.send(t, "c1", "3", "next")
	if o := h.next(t); o.GetReplyTo() != "3" || o.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL {
		t.Fatalf("next message after stop: %v", o)
	}
}

// TestStopLeavesLaterTurns: a stop request stops only the turn of a
// message before the /stop that sent it. A /stop waiting behind the turn
// it stops is delivered twice, each delivery requesting the stop; the
// second request, landing after the /stop was answered, stopped the next
// message's turn (CI: chat's "after" answered "⏹ Stopped.").
func TestStopLeavesLaterTurns(t *testing.T) {
	h := start(t)
	b := llmtest.Hold("b", llmtest.Text("answer b"), llmtest.Echo)
	a := llmtest.Hold("a", llmtest.Text("answer a"), b.Script)
	h.llm.Handle(a.Script)
	t.Cleanup(a.Release)
	t.Cleanup(b.Release)
	seqA := sendFrom(t, h.b, "c1", "1", "u", "a")
	bustest.Receive(t, a.Asked, 10*time.Second)
	seqB := sendFrom(t, h.b, "c2", "2", "u", "b")
	bustest.Receive(t, b.Asked, 10*time.Second)

	// The request of a /stop that is not before c1's running message…
	if err := worker.RequestStop(h.b.NC, h.b.Space, "cli:c1", "u", seqA); err != nil {
		t.Fatal(err)
	}
	// …and one of a /stop after c2's. The worker handles stop requests
	// in order: once c2's turn has stopped, c1's request was handled.
	if err := worker.RequestStop(h.b.NC, h.b.Space, "cli:c2", "u", seqB+1); err != nil {
		t.Fatal(err)
	}
	if o := h.next(t); o.GetReplyTo() != "2" || o.GetContent() != "⏹ Stopped." {
		t.Fatalf("reply = %v, want c2's turn stopped", o)
	}
	a.Release()
	if o := h.next(t); o.GetReplyTo() != "1" || o.GetContent() != "answer a" {
		t.Fatalf("reply = %v, want c1's turn answered", o)
	}
}

func TestMessageToolSuppressesFinal(t *testing.T) {
	h := start(t)
	h.llm.Enqueue(
		llmtest.ToolCalls(llmtest.Call("message", `{"content":"sent early"}`)),
		llmtest.Text("final that must not be sent"),
	)
	h.send(t, "c1", "1", "tell me")
	o := h.next(t)
	if o.GetContent() != "sent early" || o.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE {
		t.Fatalf("reply = %v", o)
	}
	// A session's replies go out in order: had the final been sent, it
	// would come before the answer to the next message.
	h.send(t, "c1", "2", "next")
	if o := h.next(t); o.GetReplyTo() != "2" {
		t.Fatalf("final sent too: %v", o)
	}
}

// TestMessageToolIsBounded: one turn sends at most MaxMessagesPerTurn
// messages of at most MaxMessageChars each; the model is told when it
// asks for more, and the turn goes on. Unbounded, a model told so by what
// it read flooded the chat (and its channel's deliveries) with 150
// messages of 10,000 characters in one turn.
func TestMessageToolIsBounded(t *testing.T) {
	h := start(t)
	var calls []llmtest.ToolCall
	for i := range worker.MaxMessagesPerTurn + 5 {
		calls = append(calls, llmtest.Call("message", fmt.Sprintf(`{"content":"flood %d"}`, i)))
	}
	calls = append(calls, llmtest.Call("message", fmt.Sprintf(`{"content":%q}`, strings.Repeat("x", worker.MaxMessageChars+1))))
	h.llm.Enqueue(llmtest.ToolCalls(calls...), llmtest.Text("done"))
	h.send(t, "c1", "1", "flood")
	for i := range worker.MaxMessagesPerTurn {
		if o := h.next(t); o.GetContent() != fmt.Sprintf("flood %d", i) {
			t.Fatalf("reply %d = %v", i, o)
		}
	}
	req, ok := h.llm.LastRequest()
	if !ok {
		t.Fatal("no model request")
	}
	results := req.Messages[len(req.Messages)-len(calls):]
	for i, r := range results[worker.MaxMessagesPerTurn:] {
		if !strings.HasPrefix(r.Content, "Error:") {
			t.Errorf("message %d beyond the bound answered %q", worker.MaxMessagesPerTurn+i, r.Content)
		}
	}
	// Nothing more: the next reply is the next message's.
	h.send(t, "c1", "2", "next")
	if o := h.next(t); o.GetReplyTo() != "2" {
		t.Fatalf("reply after the bound: %v", o)
	}
}

// TestMessageToOtherChats: the message tool reaches a chat other than the
// session's own only when worker.messageAllowTo lists it (a model follows
// what it reads, and the bot reaches every user); otherwise the model is
// told why and nothing goes there.
func TestMessageToOtherChats(t *testing.T) {
	tests := []struct {
		name  string
		allow []string
		sent  bool
	}{
		{"not listed", nil, false},
		{"listed", []string{"telegram:42"}, true},
		{"its channel listed", []string{"telegram:*"}, true},
		{"everything listed", []string{"*"}, true},
		{"another chat listed", []string{"telegram:43", "slack:*"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := startEdited(t, bustest.StartJetStream(t), "w1", 5*time.Second, edits{config: func(c *worker.Config) { c.MessageAllowTo = tt.allow }})
			h.llm.Enqueue(
				llmtest.ToolCalls(llmtest.Call("message", `{"content":"psst","channel":"telegram","chat_id":"42"}`)),
				llmtest.Text("done"),
			)
			h.send(t, "c1", "1", "go")
			o := h.next(t)
			if tt.sent {
				if o.GetChannel() != "telegram" || o.GetChatId() != "42" || o.GetContent() != "psst" {
					t.Fatalf("first reply %v, want the message in telegram:42", o)
				}
				o = h.next(t)
			}
			if o.GetChannel() != "cli" || o.GetChatId() != "c1" || o.GetContent() != "done" {
				t.Fatalf("reply %v, want the final answer in cli:c1 and nothing else", o)
			}
			req, ok := h.llm.LastRequest()
			if !ok {
				t.Fatal("no model request")
			}
			result := req.Messages[len(req.Messages)-1].Content
			if refused := strings.Contains(result, "worker.messageAllowTo"); refused == tt.sent {
				t.Errorf("the tool answered %q", result)
			}
		})
	}
}

// TestToolHintInChineseReachesTheChannel: a tool hint is cut to 60 bytes
// of the call's arguments; cut inside a character, the OutboundMessage
// failed proto.Marshal and the hint never reached the live subject.
func TestToolHintInChineseReachesTheChannel(t *testing.T) {
	h := start(t)
	live := make(chan *nats.Msg, 64)
	sub, err := h.b.NC.ChanSubscribe(h.b.Space.Live("cli", "c1"), live)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := h.b.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	// `{"content":"a` is 13 bytes: the cut at 60 falls 2 bytes into the
	// 16th character.
	h.llm.Enqueue(
		llmtest.ToolCalls(llmtest.Call("message", `{"content":"a`+strings.Repeat("你好", 20)+`"}`)),
		llmtest.Text("done"),
	)
	h.send(t, "c1", "1", "tell me")
	want := `message({"content":"a` + strings.Repeat("你好", 7) + "你…)"
	timeout := time.After(15 * time.Second)
	for {
		select {
		case m := <-live:
			o := &nanofleetv1.OutboundMessage{}
			if err := proto.Unmarshal(m.Data, o); err != nil {
				t.Fatalf("live message: %v", err)
			}
			if o.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT {
				continue
			}
			if o.GetContent() != want {
				t.Fatalf("tool hint %q, want %q", o.GetContent(), want)
			}
			return
		case <-timeout:
			t.Fatal("no tool hint within 15s")
		}
	}
}

// waitForModelRequest returns once the fake model has a request.
func waitForModelRequest(t *testing.T, h *harness) {
	t.Helper()
	bustest.Eventually(t, 10*time.Second, func() error {
		if h.llm.RequestCount() == 0 {
			return errors.New("the model has no request")
		}
		return nil
	})
}

// TestShutdownCutOffLeavesTheTurnToAnotherWorker: a turn cut off when the
// shutdown grace runs out is not committed as a model failure; another
// worker runs it and answers properly.
func TestShutdownCutOffLeavesTheTurnToAnotherWorker(t *testing.T) {
	b := bustest.StartJetStream(t)
	h, stop := startWith(t, b, "w-old", 100*time.Millisecond)
	h.llm.Enqueue(llmtest.Text("too slow").WithLatency(time.Minute))
	h.send(t, "c1", "1", "question")
	waitForModelRequest(t, h)
	stop() // grace of 100ms runs out mid-model-call
	// h2 reads the outbound stream from its start: its first message is
	// the only answer to "1", so the cut-off turn sent nothing.
	h2 := startOn(t, b, "w-new") // its fake model echoes
	if o := h2.next(t); o.GetContent() != "echo: question" || o.GetReplyTo() != "1" || o.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL {
		t.Fatalf("reply after takeover = %v", o)
	}
	h2.send(t, "c1", "2", "again")
	if o := h2.next(t); o.GetReplyTo() != "2" {
		t.Fatalf("after the takeover's answer: %v, want the answer to 2", o)
	}
}

// committedUnanswered sets up session cli:c with message a taken (not
// acked) by a worker that appended its turn and then failed before its
// replies went out, and message b behind it. It returns a's delivery, the
// workers' consumer and a's inbound sequence.
func committedUnanswered(t *testing.T, b *bus.Bus) (jetstream.Msg, jetstream.Consumer, uint64) {
	t.Helper()
	ctx := t.Context()
	sp := b.Space
	cons, err := b.JS.CreateOrUpdateConsumer(ctx, sp.InboundStream(), jetstream.ConsumerConfig{
		Durable: sp.WorkerConsumer(), AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxDeliver: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Message a: taken by a worker that appended its turn and then failed.
	send(t, b, "c", "a", "a")
	batch, err := cons.Fetch(1)
	if err != nil {
		t.Fatal(err)
	}
	var first jetstream.Msg
	for m := range batch.Messages() {
		first = m
	}
	if first == nil {
		t.Fatal("message a not fetched")
	}
	meta, _ := first.Metadata()
	turnID := fmt.Sprintf("in%d", meta.Sequence.Stream)
	sessions, err := session.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	rec := &nanofleetv1.TurnRecord{
		TurnId: turnID, InboundId: "a", InboundSeq: meta.Sequence.Stream, SessionKey: "cli:c",
		Replies: []*nanofleetv1.OutboundMessage{{
			Id: turnID + ":0", Channel: "cli", ChatId: "c", Content: "answer to a", Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL,
			ReplyTo: "a", SessionKey: "cli:c", TurnId: turnID, LastOfTurn: true,
		}},
	}
	if _, err := sessions.Append(ctx, "cli:c", rec, 0); err != nil {
		t.Fatal(err)
	}
	send(t, b, "c", "b", "b")
	return first, cons, meta.Sequence.Stream
}

// TestTurnAnsweredHereLetsTheNextRun: the session's next message, arriving
// before the ack of a turn this worker committed and answered, runs at
// once, without the look at the history and the replies. (The test states
// the answer with MarkAnswered; a's replies are not in the stream, so the
// look would have made b wait for a's redelivery.)
func TestTurnAnsweredHereLetsTheNextRun(t *testing.T) {
	b := bustest.StartJetStream(t)
	_, _, seqA := committedUnanswered(t, b)
	h := startOn(t, b, "w1")
	h.llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply { return llmtest.Text("answer to " + r.LastUserText()) })
	h.w.MarkAnswered("cli:c", seqA)
	// b before a's redelivery (the ack wait, seconds away) replays a.
	if o := h.next(t); o.GetContent() != "answer to b" {
		t.Fatalf("first reply %q, want the answer to b", o.GetContent())
	}
}

// TestCommittedButUnansweredTurnIsNotOvertaken: a turn whose history
// append was stored although the worker saw it fail (a time-out during a
// leader election) has no replies out yet. The session's next message must
// wait for that turn's redelivery to publish them, even though the FIFO
// guard finds the turn committed.
func TestCommittedButUnansweredTurnIsNotOvertaken(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t)
	first, cons, _ := committedUnanswered(t, b)
	h := startOn(t, b, "w1")
	h.llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply { return llmtest.Text("answer to " + r.LastUserText()) })
	// The worker looks at b and puts it back, and sends nothing.
	bustest.Eventually(t, 10*time.Second, func() error {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case o := <-h.out:
			t.Fatalf("reply %q went out before message a's turn was answered", o.GetContent())
		default:
		}
		if info.NumRedelivered == 0 {
			return fmt.Errorf("message b was never put back: %+v", info)
		}
		return nil
	})
	// a's redelivery republishes its committed replies; then b runs.
	if err := first.Nak(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"answer to a", "answer to b"} {
		if o := h.next(t); o.GetContent() != want {
			t.Fatalf("reply %q, want %q", o.GetContent(), want)
		}
	}
}

// TestPoisonMessageIsSetAside: a message whose turn never finishes (here
// every worker that runs it is stopped mid-model-call, as a crash would)
// is started at most MaxAttempts+1 times (its first start saves no
// checkpoint), then dead-lettered, and its sender gets an error reply.
func TestPoisonMessageIsSetAside(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t)
	maxAttempts := worker.DefaultConfig().MaxAttempts
	starts := 0
	for i := range maxAttempts + 1 {
		// The model never answers in time, from the worker's first fetch on.
		h, stop := startWith(t, b, fmt.Sprintf("w%d", i), 50*time.Millisecond, llmtest.WithLatency(time.Minute))
		if i == 0 {
			h.send(t, "c", "poison", "question")
		}
		bustest.Eventually(t, 10*time.Second, func() error {
			if h.llm.RequestCount() == 0 {
				return fmt.Errorf("start %d: the turn never reached the model", i+1)
			}
			return nil
		})
		starts++
		stop()
	}
	h := startOn(t, b, "w-last")
	o := h.next(t)
	if o.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR || o.GetReplyTo() != "poison" || !strings.Contains(o.GetContent(), "set aside") {
		t.Fatalf("reply after %d starts = %v, want the error reply", starts, o)
	}
	if n := h.llm.RequestCount(); n != 0 {
		t.Errorf("the message was started again (%d model requests) after %d starts", n, starts)
	}
	dlq, err := b.JS.Stream(ctx, b.Space.DeadLetterStream())
	if err != nil {
		t.Fatal(err)
	}
	if info, err := dlq.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("dead letters: %v, %v; want the poison message", info, err)
	}
}

// TestStreamedFinalIsMarked: the final answer of a turn whose deltas went
// out says so (streamed=true), so that a gateway the reply reaches before
// the deltas waits for the stream (editstream.Finish); an answer that
// streamed nothing (a command) is not marked.
func TestStreamedFinalIsMarked(t *testing.T) {
	h := start(t)
	h.llm.Enqueue(llmtest.Text("streamed answer"))
	tests := []struct{ id, text, want string }{
		{"1", "hello", "true"},
		{"2", "/help", ""},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			in := &nanofleetv1.InboundMessage{Id: tt.id, Channel: "cli", ChatId: "c1", SenderId: "u", Content: tt.text,
				Metadata: map[string]string{"stream": "true"}}
			data, err := proto.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.b.JS.Publish(t.Context(), h.b.Space.Inbound("cli", "c1"), data); err != nil {
				t.Fatal(err)
			}
			o := h.next(t)
			if o.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL || o.GetMetadata()["streamed"] != tt.want || o.GetMetadata()["stream"] != "true" {
				t.Errorf("reply %v, want a final with streamed=%q beside the inbound's metadata", o, tt.want)
			}
		})
	}
}
