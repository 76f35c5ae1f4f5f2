package subagent_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/agenttool"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/subagent"
)

func TestFilterDefinitions(t *testing.T) {
	defs := []*nanofleetv1.ToolDefinition{{Name: "cron"}, {Name: "exec"}, {Name: "read_file"}, {Name: "spawn"}}
	names := func(ds []*nanofleetv1.ToolDefinition) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.GetName())
		}
		return out
	}
	tests := []struct {
		name string
		meta map[string]string
		want []string
	}{
		{"a user's turn keeps everything", nil, []string{"cron", "exec", "read_file", "spawn"}},
		{"a child gets its tools", map[string]string{"toolset": "subagent", "tools": "read_file, exec,web_fetch"}, []string{"exec", "read_file"}},
		{"a child never gets spawn", map[string]string{"toolset": "subagent", "tools": "spawn,exec"}, []string{"exec"}},
		{"a child without a list gets none", map[string]string{"toolset": "subagent"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := names(subagent.FilterDefinitions(&nanofleetv1.InboundMessage{Metadata: tt.meta}, defs))
			if !slices.Equal(got, tt.want) {
				t.Errorf("tools = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*subagent.Config)
		ok     bool
		// key is the config file's key of a field the file sets; the
		// others are set by code, and their errors are not the file's.
		key string
	}{
		{"defaults", func(*subagent.Config) {}, true, ""},
		{"no limit", func(c *subagent.Config) { c.MaxPerSession = 0 }, false, "schedule.subagents.maxPerSession"},
		{"short wait", func(c *subagent.Config) { c.WaitTimeout = time.Millisecond }, false, ""},
		{"stale before wait", func(c *subagent.Config) { c.StaleAfter = time.Second }, false, ""},
		{"spawn as child tool", func(c *subagent.Config) { c.Tools = []string{"exec", "spawn"} }, false, ""},
		{"the file's key named beside code's problem", func(c *subagent.Config) { c.MaxPerSession, c.Tools = 0, []string{"spawn"} }, false, "schedule.subagents.maxPerSession"},
	}
	for _, tt := range tests {
		c := subagent.DefaultConfig()
		tt.change(&c)
		err := c.Validate()
		var ce *config.Error
		switch {
		case (err == nil) != tt.ok:
			t.Errorf("%s: Validate = %v", tt.name, err)
		case tt.key != "" && (!errors.As(err, &ce) || ce.Key != tt.key):
			t.Errorf("%s: %v does not name %s", tt.name, err, tt.key)
		case err != nil && tt.key == "" && errors.Is(err, config.ErrInvalid):
			t.Errorf("%s: %v blames the config file for a value set by code", tt.name, err)
		}
	}
}

type env struct {
	b     *bus.Bus
	m     *subagent.Manager
	tool  agenttool.Tool
	inbox chan jetstream.Msg
}

// setup provisions a fleet with a manager running and no workers: the test
// plays the workers by reading inbound and publishing replies.
func setup(t *testing.T, cfg subagent.Config) *env {
	t.Helper()
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	if err := bus.Provision(ctx, b, bustest.TestLayout(), subagent.Assets); err != nil {
		t.Fatal(err)
	}
	m, err := subagent.New(ctx, cfg, b)
	if err != nil {
		t.Fatal(err)
	}
	// A parent's /stop published before Run subscribed would be lost.
	svctest.Run(t, m.Run, svctest.Ready(m.Listening(), 30*time.Second))
	cons, err := b.JS.CreateOrUpdateConsumer(ctx, b.Space.InboundStream(), jetstream.ConsumerConfig{Durable: "test", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{b: b, m: m, tool: m.Tool(), inbox: make(chan jetstream.Msg, 100)}
	cc, err := cons.Consume(func(msg jetstream.Msg) { e.inbox <- msg })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return e
}

func (e *env) next(t *testing.T) (*nanofleetv1.InboundMessage, jetstream.Msg) {
	t.Helper()
	select {
	case msg := <-e.inbox:
		in := &nanofleetv1.InboundMessage{}
		if err := proto.Unmarshal(msg.Data(), in); err != nil {
			t.Fatal(err)
		}
		return in, msg
	case <-time.After(10 * time.Second):
		t.Fatal("no inbound message")
		return nil, nil
	}
}

// lastInbound is the sequence of the inbound stream's last message.
func (e *env) lastInbound(t *testing.T) uint64 {
	t.Helper()
	st, err := e.b.JS.Stream(t.Context(), e.b.Space.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.LastSeq
}

// noInboundSince fails the test if the inbound stream stored a message
// after seq, once the announcer has taken every reply (a message it
// publishes is stored before it acks the reply): what says what one
// would mean.
func (e *env) noInboundSince(t *testing.T, seq uint64, what string) {
	t.Helper()
	bustest.Eventually(t, 10*time.Second, func() error {
		c, err := e.b.JS.Consumer(t.Context(), e.b.Space.OutboundStream(), subagent.AnnounceConsumer)
		if err != nil {
			return err
		}
		if info := c.CachedInfo(); info.NumPending+uint64(info.NumAckPending) > 0 {
			return fmt.Errorf("the announcer still holds replies: %d pending, %d unacked", info.NumPending, info.NumAckPending)
		}
		return nil
	})
	if last := e.lastInbound(t); last != seq {
		t.Fatalf("%s: the inbound stream's last message is %d, after %d", what, last, seq)
	}
}

func (e *env) spawn(ctx context.Context, t *testing.T, argsJSON string) (string, error) {
	t.Helper()
	return e.call(ctx, e.args(t, argsJSON))
}

// args parses argsJSON against the tool's schema, failing the test if it
// does not fit; it calls t.Fatal, so only from the test's goroutine.
func (e *env) args(t *testing.T, argsJSON string) map[string]any {
	t.Helper()
	args, err := toolschema.MustCompile(e.tool.Tool().Parameters).Parse(argsJSON)
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// call runs the tool with parsed args in the test's turn.
func (e *env) call(ctx context.Context, args map[string]any) (string, error) {
	tc := &agenttool.TurnContext{SessionKey: "telegram:9", TurnID: "in3", InboundSeq: 3,
		Inbound: &nanofleetv1.InboundMessage{Id: "u1", Channel: "telegram", ChatId: "9"}}
	return e.tool.Call(ctx, tc, args)
}

// A child and its announcement are the turns of the user whose turn
// spawned it: their token budget ([subagent.Payer]), and in a group the
// group's marker. As senders "agent" and "subagent" every user's children
// spent one budget and read one user-scoped memory.
func TestChildIsItsParentsUsersTurn(t *testing.T) {
	for _, group := range []bool{false, true} {
		e := setup(t, subagent.DefaultConfig())
		in := &nanofleetv1.InboundMessage{Id: "u1", Channel: "telegram", ChatId: "9", SenderId: "ada"}
		if group {
			in.Metadata = map[string]string{"chat_type": "group"}
		}
		tc := &agenttool.TurnContext{SessionKey: "telegram:9", TurnID: "in3", Inbound: in}
		args, err := toolschema.MustCompile(e.tool.Tool().Parameters).Parse(`{"task":"look it up"}`)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.tool.Call(t.Context(), tc, args); err != nil {
			t.Fatal(err)
		}
		child, msg := e.next(t)
		_ = msg.Ack()
		if got := subagent.Payer(child); got != "telegram:ada" {
			t.Errorf("group %v: child (sender %q) is paid by %q, want telegram:ada", group, child.GetSenderId(), got)
		}
		if got := child.GetMetadata()["is_group"] == "true"; got != group {
			t.Errorf("group %v: child metadata %v", group, child.GetMetadata())
		}
		e.reply(t, child, "found it")
		ann, msg := e.next(t)
		_ = msg.Ack()
		if ann.GetSenderId() != "ada" || subagent.Payer(ann) != "telegram:ada" || (ann.GetMetadata()["is_group"] == "true") != group {
			t.Errorf("group %v: announcement sender %q, metadata %v; want ada's", group, ann.GetSenderId(), ann.GetMetadata())
		}
	}
}

// reply plays the worker that ran the child: its final reply, carrying
// the child's metadata, on the child's outbound subject.
func (e *env) reply(t *testing.T, child *nanofleetv1.InboundMessage, text string) {
	t.Helper()
	out := &nanofleetv1.OutboundMessage{Id: "in9:0", Channel: child.GetChannel(), ChatId: child.GetChatId(), Content: text,
		Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, SessionKey: child.GetSessionKey(), Metadata: child.GetMetadata()}
	data, _ := proto.Marshal(out)
	m := nats.NewMsg(e.b.Space.Outbound(child.GetChannel(), child.GetChatId()))
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, out.GetId()+child.GetSessionKey())
	if _, err := e.b.JS.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

func TestSpawnAndAnnounce(t *testing.T) {
	e := setup(t, subagent.DefaultConfig())
	out, err := e.spawn(t.Context(), t, `{"task":"summarise the logs","label":"logs"}`)
	if err != nil || !strings.Contains(out, "Subagent [logs] started") {
		t.Fatalf("spawn = %q, %v", out, err)
	}
	child, msg := e.next(t)
	_ = msg.Ack()
	if child.GetKind() != nanofleetv1.InboundKind_INBOUND_KIND_SUBAGENT || child.GetChannel() != subagent.Channel ||
		!strings.HasPrefix(child.GetSessionKey(), "subagent:telegram:9:") || !subagent.IsChild(child) ||
		!strings.Contains(child.GetContent(), "summarise the logs") {
		t.Fatalf("child = %v", child)
	}
	kids, err := e.m.Children(t.Context(), "telegram:9")
	if err != nil || len(kids) != 1 || kids[0].SessionKey != child.GetSessionKey() {
		t.Fatalf("children = %v, %v", kids, err)
	}
	// The same turn calling spawn again (a resumed turn) starts nothing new.
	if _, err := e.spawn(t.Context(), t, `{"task":"summarise the logs","label":"logs"}`); err != nil {
		t.Fatal(err)
	}

	e.reply(t, child, "3 errors, all timeouts")
	e.reply(t, child, "3 errors, all timeouts") // a replayed commit
	ann, msg := e.next(t)
	_ = msg.Ack()
	if ann.GetChannel() != "telegram" || ann.GetChatId() != "9" || ann.GetKind() != nanofleetv1.InboundKind_INBOUND_KIND_SUBAGENT ||
		!strings.Contains(ann.GetContent(), "3 errors, all timeouts") || !strings.Contains(ann.GetContent(), "[Subagent 'logs' completed successfully]") {
		t.Fatalf("announcement = %v", ann)
	}
	md, err := msg.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	e.noInboundSince(t, md.Sequence.Stream, "second inbound")
	if kids, _ := e.m.Children(t.Context(), "telegram:9"); len(kids) != 0 {
		t.Errorf("children after announcement: %v", kids)
	}
	// The parent turn resumed after a crash calls spawn once more: the
	// child is done, nothing starts again (spawn has returned: a child's
	// task would be stored).
	before := e.lastInbound(t)
	out, err = e.spawn(t.Context(), t, `{"task":"summarise the logs","label":"logs"}`)
	if err != nil || !strings.Contains(out, "already finished") || !strings.Contains(out, "3 errors") {
		t.Errorf("spawn after the child finished = %q, %v", out, err)
	}
	if last := e.lastInbound(t); last != before {
		t.Errorf("child started again: the inbound stream's last message is %d, after %d", last, before)
	}
}

func TestSpawnWait(t *testing.T) {
	e := setup(t, subagent.DefaultConfig())
	type result struct {
		out string
		err error
	}
	res := make(chan result, 1)
	args := e.args(t, `{"task":"count files","wait":true}`)
	go func() {
		out, err := e.call(t.Context(), args)
		res <- result{out, err}
	}()
	child, msg := e.next(t)
	_ = msg.Ack()
	e.reply(t, child, "17 files")
	select {
	case r := <-res:
		if r.err != nil || !strings.Contains(r.out, "17 files") {
			t.Fatalf("spawn(wait) = %q, %v", r.out, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("spawn(wait) did not return")
	}
	md, err := msg.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	e.noInboundSince(t, md.Sequence.Stream, "announced although awaited")
	e.noConsumerLeft(t)
}

// noConsumerLeft fails the test if a consumer the wait for a child's
// result made (one without a durable name) is still on the outbound
// stream.
func (e *env) noConsumerLeft(t *testing.T) {
	t.Helper()
	s, err := e.b.JS.Stream(t.Context(), e.b.Space.OutboundStream())
	if err != nil {
		t.Fatal(err)
	}
	consumers := s.ListConsumers(t.Context())
	for ci := range consumers.Info() {
		if ci.Config.Durable == "" {
			t.Errorf("consumer %s (filter %s%v) left on %s", ci.Name, ci.Config.FilterSubject, ci.Config.FilterSubjects, e.b.Space.OutboundStream())
		}
	}
	if err := consumers.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestSpawnWaitTimeoutAnnouncesLater(t *testing.T) {
	cfg := subagent.DefaultConfig()
	cfg.WaitTimeout = time.Second
	e := setup(t, cfg)
	out, err := e.spawn(t.Context(), t, `{"task":"slow","wait":true}`)
	if err != nil || !strings.Contains(out, "still running") {
		t.Fatalf("spawn = %q, %v", out, err)
	}
	e.noConsumerLeft(t)
	child, msg := e.next(t)
	_ = msg.Ack()
	e.reply(t, child, "finally")
	if ann, _ := e.next(t); !strings.Contains(ann.GetContent(), "finally") {
		t.Errorf("announcement = %q", ann.GetContent())
	}
}

func TestStopChildren(t *testing.T) {
	e := setup(t, subagent.DefaultConfig())
	stops := make(chan *nats.Msg, 10)
	sub, err := e.b.NC.ChanSubscribe(e.b.Space.StopAll(), stops)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if _, err := e.spawn(t.Context(), t, `{"task":"a"}`); err != nil {
		t.Fatal(err)
	}
	child, _ := e.next(t) // taken by a worker, not acked yet: "running"

	// The parent's /stop, as the worker publishes it: the /stop came
	// after the spawning turn's message (3).
	data, _ := proto.Marshal(&nanofleetv1.StopRequest{SessionKey: "telegram:9", BeforeSeq: 4})
	if err := e.b.NC.Publish(e.b.Space.Stop("telegram:9"), data); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-stops:
			req := &nanofleetv1.StopRequest{}
			_ = proto.Unmarshal(m.Data, req)
			if req.GetSessionKey() != child.GetSessionKey() {
				continue
			}
		case <-deadline:
			t.Fatal("child not stopped")
		}
		break
	}
	// Its task left the inbound stream, and its result is never announced.
	bustest.Eventually(t, 5*time.Second, func() error {
		st, err := e.b.JS.Stream(t.Context(), e.b.Space.InboundStream())
		if err != nil {
			return err
		}
		info, err := st.Info(t.Context())
		if err != nil {
			return err
		}
		if info.State.Msgs != 0 {
			return fmt.Errorf("inbound stream still holds %d messages", info.State.Msgs)
		}
		return nil
	})
	before := e.lastInbound(t)
	e.reply(t, child, "⏹ Stopped.")
	e.noInboundSince(t, before, "stopped child announced")
	if kids, _ := e.m.Children(t.Context(), "telegram:9"); len(kids) != 0 {
		t.Errorf("stopped children still counted: %v", kids)
	}
}

// TestStopLeavesChildrenOfLaterTurns: a /stop stops only the children of
// turns before it. A request of a /stop delivered again that lands after
// the next message's turn spawned a child stopped that child.
func TestStopLeavesChildrenOfLaterTurns(t *testing.T) {
	e := setup(t, subagent.DefaultConfig())
	if _, err := e.spawn(t.Context(), t, `{"task":"a"}`); err != nil { // by the turn of message 3
		t.Fatal(err)
	}
	e.next(t)
	for _, tt := range []struct {
		beforeSeq uint64
		want      int
	}{
		{beforeSeq: 2, want: 0},
		{beforeSeq: 3, want: 0},
		{beforeSeq: 4, want: 1},
	} {
		n, err := e.m.StopChildren(t.Context(), "telegram:9", tt.beforeSeq)
		if err != nil || n != tt.want {
			t.Errorf("StopChildren before %d = %d, %v; want %d", tt.beforeSeq, n, err, tt.want)
		}
	}
}

func TestSpawnRefusedInChild(t *testing.T) {
	e := setup(t, subagent.DefaultConfig())
	tc := &agenttool.TurnContext{SessionKey: "subagent:x:1", Inbound: &nanofleetv1.InboundMessage{Metadata: map[string]string{subagent.MetaToolset: subagent.ToolsetSubagent}}}
	if _, err := e.tool.Call(t.Context(), tc, map[string]any{"task": "x"}); !errors.Is(err, subagent.ErrNested) {
		t.Fatalf("spawn in a child = %v", err)
	}
}

// TestAnnounceDeadLettersUndecodable: a child's reply that does not decode
// is dead-lettered with the reason, and the child's next reply is still
// announced.
func TestAnnounceDeadLettersUndecodable(t *testing.T) {
	e := setup(t, subagent.DefaultConfig())
	for _, tt := range bustest.Malformed {
		t.Run(tt.Name, func(t *testing.T) {
			if _, err := e.spawn(t.Context(), t, `{"task":"count `+tt.Name+`","label":"`+tt.Name+`"}`); err != nil {
				t.Fatal(err)
			}
			child, msg := e.next(t)
			_ = msg.Ack()
			subj := e.b.Space.Outbound(child.GetChannel(), child.GetChatId())
			bustest.Publish(t, e.b, subj, tt.Data)
			e.reply(t, child, "42 of "+tt.Name)
			// Replies are announced one at a time in stream order: once
			// the good one is, the bad one is done.
			ann, msg := e.next(t)
			_ = msg.Ack()
			if !strings.Contains(ann.GetContent(), "42 of "+tt.Name) {
				t.Fatalf("announcement = %v", ann)
			}
			bustest.WantDeadLetter(t, e.b, "outbound", subj, tt.Data, "decode outbound message: ")
		})
	}
}

// TestRunEndsWithItsContextWhileTheServerIsGone: Run started while the
// server cannot be reached ends when its context does, not when its wait
// for the server's acknowledgement of the stop subscription gives up.
func TestRunEndsWithItsContextWhileTheServerIsGone(t *testing.T) {
	srv := bustest.StartServer(t)
	b := srv.Connect(t, "", subagent.Assets)
	m, err := subagent.New(t.Context(), subagent.DefaultConfig(), b)
	if err != nil {
		t.Fatal(err)
	}
	gone := b.NC.StatusChanged(nats.RECONNECTING)
	srv.Shutdown()
	// A flush under way when the client sees the server gone returns at
	// once; one begun while it reconnects waits.
	bustest.Receive(t, gone, 10*time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	cancel()
	// Ended by its context, the wait says so; a wait on its own bound
	// would end later with DeadlineExceeded.
	if err := bustest.Receive(t, done, 30*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want it ended by its context (context.Canceled)", err)
	}
}

// TestRunOutlivesItsConnectionDroppingAtStart: the worker's connection
// drops (its node restarts) while Run waits for the server to hold the
// stop subscription. nats.go fails that wait with "connection closed"
// though it reconnects and subscribes again, and Run failed, which ends
// the agent worker. It must listen once the connection is back.
func TestRunOutlivesItsConnectionDroppingAtStart(t *testing.T) {
	srv := bustest.StartServer(t)
	srv.Connect(t, "", subagent.Assets) // provisions the layout
	hop := bustest.NewProxy(t, srv.ClientURL())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b := hop.Connect(t, srv.ClientURL())
	m, err := subagent.New(ctx, subagent.DefaultConfig(), b)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	hop.CutAt(ctx, t, "SUB "+b.Space.StopAll()+" ", func() {
		go func() { done <- m.Run(ctx) }()
		select {
		case <-m.Listening():
		case err := <-done:
			t.Fatalf("Run with its connection dropped and back: %v", err)
		case <-ctx.Done():
			t.Fatal("not listening a minute after the connection dropped")
		}
	})
}
