// Package jobstest runs the fleet's time and delegation features — cron
// jobs, the heartbeat, subagents and /stop — end to end: real embedded
// NATS, real workers, the fake OpenAI server.
package jobstest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
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
	"github.com/nanofleet/nanofleet/pkg/schedule"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/heartbeat"
	"github.com/nanofleet/nanofleet/services/agent-worker/subagent"
	"github.com/nanofleet/nanofleet/services/agent-worker/worker"
)

// fleet is a NATS server and the test's view of it.
type fleet struct {
	t   *testing.T
	srv *bustest.Server
	b   *bus.Bus

	mu   sync.Mutex
	outs []received
	news chan struct{}
}

type received struct {
	msg *nanofleetv1.OutboundMessage
	at  time.Time
}

func newFleet(t *testing.T) *fleet {
	return newFleetIn(t, t.TempDir())
}

// newFleetIn starts a server on dir and watches every durable reply
// published from now on.
func newFleetIn(t *testing.T, dir string) *fleet {
	t.Helper()
	f := &fleet{t: t, srv: bustest.StartServerIn(t, dir), news: make(chan struct{}, 1)}
	f.b = connect(t, f.srv)
	cons, err := f.b.JS.OrderedConsumer(t.Context(), f.b.Space.OutboundStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{f.b.Space.OutboundAll()},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		o := &nanofleetv1.OutboundMessage{}
		if proto.Unmarshal(m.Data(), o) != nil {
			return
		}
		f.mu.Lock()
		f.outs = append(f.outs, received{msg: o, at: time.Now()})
		f.mu.Unlock()
		select {
		case f.news <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return f
}

// connect opens a provisioned connection of the default fleet.
func connect(t *testing.T, srv *bustest.Server) *bus.Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: srv.ClientURL(), Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.NC.Close() })
	if err := bus.Provision(ctx, b, bustest.TestLayout(), schedule.Assets, subagent.Assets); err != nil {
		t.Fatal(err)
	}
	return b
}

// await returns the first reply (seen so far or arriving within d) that
// matches.
func (f *fleet) await(d time.Duration, what string, match func(*nanofleetv1.OutboundMessage) bool) received {
	f.t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		seen := f.outs[:len(f.outs):len(f.outs)]
		f.mu.Unlock()
		for _, r := range seen {
			if match(r.msg) {
				return r
			}
		}
		select {
		case <-f.news:
		case <-deadline.C:
			f.t.Fatalf("no %s within %s; replies: %s", what, d, f.dump())
		}
	}
}

// all returns the replies seen so far that match.
func (f *fleet) all(match func(*nanofleetv1.OutboundMessage) bool) []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []received
	for _, r := range f.outs {
		if match(r.msg) {
			out = append(out, r)
		}
	}
	return out
}

func (f *fleet) dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, r := range f.outs {
		fmt.Fprintf(&b, "\n  %s:%s reply_to=%s kind=%s %q", r.msg.GetChannel(), r.msg.GetChatId(), r.msg.GetReplyTo(), r.msg.GetKind(), clip(r.msg.GetContent()))
	}
	return b.String()
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// send publishes a user message to cli:<chat>.
func (f *fleet) send(chat, id, text string) {
	f.t.Helper()
	in := &nanofleetv1.InboundMessage{Id: id, Channel: "cli", ChatId: chat, SenderId: "u", Content: text, Kind: nanofleetv1.InboundKind_INBOUND_KIND_USER}
	data, _ := proto.Marshal(in)
	m := nats.NewMsg(f.b.Space.Inbound("cli", chat))
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, "cli:"+id)
	if _, err := f.b.JS.PublishMsg(f.t.Context(), m); err != nil {
		f.t.Fatal(err)
	}
}

func replyTo(id string) func(*nanofleetv1.OutboundMessage) bool {
	return func(o *nanofleetv1.OutboundMessage) bool { return o.GetReplyTo() == id }
}

// runners is a fake tool-runner fleet: read_file answers, exec blocks
// until its context ends (a long tool call), browser is a tool a subagent
// must not get.
type runners struct {
	execStarted chan struct{}
	// execEnded, when set, gets the error of the context that ended exec.
	execEnded chan error
}

func (r *runners) CachedCatalog(context.Context) ([]*nanofleetv1.ToolDefinition, error) {
	obj := `{"type":"object","properties":{"path":{"type":"string"},"command":{"type":"string"},"url":{"type":"string"}}}`
	return []*nanofleetv1.ToolDefinition{
		{Name: "read_file", Description: "read a file", ParametersJson: obj, ReadOnly: true},
		{Name: "exec", Description: "run a command", ParametersJson: obj},
		{Name: "browser", Description: "drive a browser", ParametersJson: obj},
	}, nil
}

func (r *runners) Call(ctx context.Context, req *nanofleetv1.ToolRequest) (*nanofleetv1.ToolResult, error) {
	if req.GetName() == "exec" {
		if r.execStarted != nil {
			select {
			case r.execStarted <- struct{}{}:
			default:
			}
		}
		<-ctx.Done()
		if r.execEnded != nil {
			select {
			case r.execEnded <- ctx.Err():
			default:
			}
		}
		return &nanofleetv1.ToolResult{CallId: req.GetCallId(), Content: "killed", IsError: true}, nil
	}
	return &nanofleetv1.ToolResult{CallId: req.GetCallId(), Content: "contents of " + req.GetArgumentsJson()}, nil
}

// nodeConfig says what one agent-worker process runs.
type nodeConfig struct {
	slots     int
	heartbeat *heartbeat.Config
	runners   *runners
	subagents *subagent.Config
	location  *time.Location
}

// node is one agent-worker process: a worker with the cron and spawn
// tools, a schedule relay, the subagent manager and (optionally) the
// heartbeat, on its own connection.
type node struct {
	t      testing.TB
	id     string
	b      *bus.Bus
	sched  *schedule.Scheduler
	subs   *subagent.Manager
	hb     *heartbeat.Service
	cancel context.CancelFunc
	done   chan struct{}
	// killed is set once the test has cut the node off NATS: its loops
	// failing on the closed connection after that is the crash, not a bug.
	killed atomic.Bool
}

func (f *fleet) startNode(id string, model *llmtest.Server, nc nodeConfig) *node {
	t := f.t
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	b := connect(t, f.srv)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", id)
	client, err := llm.New(llm.Config{Name: "openai", APIBase: model.URL(), APIKey: "k", Model: "test-model", MaxRetries: 1},
		llm.WithSleep(func(context.Context, time.Duration) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	profiles := profiletest.Ready(ctx, t, b)
	sched, err := schedule.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	var toolOpts []schedule.ToolOption
	if nc.location != nil {
		toolOpts = append(toolOpts, schedule.WithLocation(nc.location))
	}
	cronTool, err := schedule.NewTool(sched, toolOpts...)
	if err != nil {
		t.Fatal(err)
	}
	scfg := subagent.DefaultConfig()
	if nc.subagents != nil {
		scfg = *nc.subagents
	}
	subs, err := subagent.New(ctx, scfg, b, subagent.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, id: id, b: b, sched: sched, subs: subs, cancel: cancel, done: make(chan struct{})}
	var relayOpts []schedule.RelayOption
	if nc.heartbeat != nil {
		if n.hb, err = heartbeat.New(ctx, *nc.heartbeat, heartbeat.Deps{Bus: b, Scheduler: sched, Profiles: profiles}, heartbeat.WithLogger(log)); err != nil {
			t.Fatal(err)
		}
		if err := n.hb.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
		relayOpts = append(relayOpts, schedule.WithPrepare(n.hb.Prepare))
	}
	relay, err := schedule.NewRelay(ctx, b, append(relayOpts, schedule.WithLogger(log))...)
	if err != nil {
		t.Fatal(err)
	}
	cfg := worker.DefaultConfig()
	cfg.ID = id
	cfg.Model = "test-model"
	cfg.Slots = max(nc.slots, 1)
	cfg.LeaseTTL = bustest.TestLayout().LeaseTTL
	cfg.AckWait = config.Seconds(3 * time.Second)
	cfg.ShutdownGrace = config.Seconds(200 * time.Millisecond)
	rt := nc.runners
	if rt == nil {
		rt = &runners{}
	}
	w, err := worker.New(ctx, cfg, worker.Deps{
		Bus: b, Model: client, Tools: rt, Profiles: profiles,
		Local: []worker.LocalTool{worker.MessageTool{}, cronTool, subs.Tool()},
	}, worker.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && !n.killed.Load() {
				t.Errorf("%s %s: %v", id, name, err)
			}
		}()
	}
	run("worker", w.Run)
	run("relay", relay.Run)
	run("subagents", subs.Run)
	if n.hb != nil {
		run("heartbeat", n.hb.Run)
	}
	go func() {
		wg.Wait()
		profiles.Stop()
		b.NC.Close()
		close(n.done)
	}()
	t.Cleanup(n.stop)
	return n
}

// stop ends the process: running turns get the shutdown grace, then are
// cut off, as with SIGTERM.
func (n *node) stop() {
	n.cancel()
	bustest.Receive(n.t, n.done, 30*time.Second)
}

// kill cuts the process off NATS as a crash would: nothing it does from
// now on reaches the fleet; its lease and unacked messages expire.
func (n *node) kill() {
	n.killed.Store(true)
	n.b.NC.Close()
}

// waitUntil polls cond (for state only observable by reading, such as a
// model's request log) until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	bustest.Eventually(t, d, func() error {
		if !cond() {
			return errors.New(what)
		}
		return nil
	})
}

// lastIs reports whether the request's last message is a tool result.
func lastIsTool(r *llmtest.RecordedRequest) bool { return r.LastMessage().Role == "tool" }

// toolResults returns the contents of the request's tool messages.
func toolResults(r llmtest.RecordedRequest) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "tool" {
			out = append(out, llmtest.MessageText(m))
		}
	}
	return out
}

func profileCache(t *testing.T, f *fleet) *profile.Cache {
	t.Helper()
	return profiletest.Ready(t.Context(), t, f.b)
}

func nopLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
