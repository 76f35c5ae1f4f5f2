package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet/fleettest"
)

// plan sizes a chaos run.
type plan struct {
	sessions, perSession int
	// round is the pause between two messages of a session: every round
	// each session gets its next message.
	round time.Duration
	// killEvery bounds the pause between two process kills; downFor how
	// long a killed process stays dead.
	killEvery, downFor [2]time.Duration
	// nodeRestarts NATS nodes are killed (SIGKILL) and restarted after
	// nodeDown, spread over the publishing time.
	nodeRestarts int
	nodeDown     time.Duration
	workers      int
	runners      int
	modelLatency time.Duration
	timeout      time.Duration
}

var (
	// shortPlan runs in `make test` (about 40 s): worker and tool-runner
	// kills only. NATS node restarts are in the long plan (`make chaos`).
	shortPlan = plan{
		sessions:     12,
		perSession:   12,
		round:        600 * time.Millisecond,
		killEvery:    [2]time.Duration{1000 * time.Millisecond, 1500 * time.Millisecond},
		downFor:      [2]time.Duration{300 * time.Millisecond, time.Second},
		nodeRestarts: 0,
		workers:      3,
		runners:      2,
		modelLatency: 30 * time.Millisecond,
		timeout:      3 * time.Minute,
	}
	longPlan = plan{
		sessions:     40,
		perSession:   50,
		round:        time.Second,
		killEvery:    [2]time.Duration{2 * time.Second, 4 * time.Second},
		downFor:      [2]time.Duration{500 * time.Millisecond, 2 * time.Second},
		nodeRestarts: 3,
		nodeDown:     5 * time.Second,
		workers:      3,
		runners:      2,
		modelLatency: 30 * time.Millisecond,
		timeout:      10 * time.Minute,
	}
)

// TestChaos runs a multi-process fleet on a 3-node JetStream cluster
// under load while a monkey SIGKILLs and restarts workers, tool runners
// and NATS nodes, then checks exactly-once replies, per-session order and
// the history from the streams. NANOFLEET_CHAOS=long runs the long plan
// (make chaos); NANOFLEET_CHAOS_SEED replays a run's random choices.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process chaos test")
	}
	p, name := shortPlan, "short"
	if os.Getenv("NANOFLEET_CHAOS") == "long" {
		p, name = longPlan, "long"
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("NANOFLEET_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("NANOFLEET_CHAOS_SEED: %v", err)
		}
	}
	t.Logf("chaos plan %s, seed %d (NANOFLEET_CHAOS_SEED=%d replays it)", name, seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))
	started := time.Now()

	bins := fleettest.Build(t, "agent-worker", "tool-runner")
	cluster := startCluster(t, bustest.ServerBinary(t), t.TempDir(), 3)
	ctx, cancel := context.WithTimeout(t.Context(), p.timeout)
	defer cancel()
	b := cluster.connect(ctx, t)

	model := newModel(t, p.modelLatency)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "chaos.txt"), []byte("chaos\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fleettest.WriteConfig(t, map[string]any{
		"agents":    map[string]any{"defaults": map[string]any{"model": "fake-model"}},
		"providers": map[string]any{"custom": map[string]any{"apiKey": "chaos", "apiBase": model.URL()}},
		"nats":      map[string]any{"replicas": 3, "leaseTtlSeconds": 3},
		"worker":    map[string]any{"ackWaitSeconds": 3, "modelRetries": 2},
		"tools":     map[string]any{"exec": map[string]any{"sandbox": "none"}},
	})
	// Info level: the services say when they run, and log nothing per turn.
	f := &fleetProcs{t: t, bins: bins, common: []string{"--nats", cluster.urls(), "--config", cfg, "--http", "", "--log-level", "info", "--workspace", ws}}
	for i := range p.runners {
		f.runners = append(f.runners, f.start(kindRunner, i, 0))
		f.runners[i].WaitOutput(t, "tool-runner running", time.Minute)
	}
	for i := range p.workers {
		f.workers = append(f.workers, f.start(kindWorker, i, 0))
		f.workers[i].WaitOutput(t, "agent-worker running", time.Minute)
	}
	t.Logf("%6.1fs fleet running: %d workers, %d tool runners on 3 NATS nodes", time.Since(started).Seconds(), p.workers, p.runners)

	// Publish: every round, each session's next message.
	total := p.sessions * p.perSession
	pubDone := make(chan struct{})
	var published sync.WaitGroup
	published.Add(1)
	go func() {
		defer published.Done()
		defer close(pubDone)
		tick := time.NewTicker(p.round)
		defer tick.Stop()
		for n := range p.perSession {
			for s := range p.sessions {
				if err := publish(ctx, b, s, n); err != nil {
					t.Errorf("publish s%d %d: %v", s, n, err)
					return
				}
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()

	// The monkey: kill and restart workers and runners at random; kill
	// and restart NATS nodes at fixed points of the publishing time.
	st := &stats{kills: map[string]int{}}
	f.onCrash = func(name, out string) {
		st.crashes = append(st.crashes, name)
		t.Logf("%6.1fs %s exited on its own; restarted. Its last output:\n%s", time.Since(started).Seconds(), name, tail(out, 1500))
	}
	publishing := time.Duration(p.perSession) * p.round
	nextNode := 1
	for monkeyStart := time.Now(); ; {
		f.supervise()
		select {
		case <-pubDone:
		default:
			if nextNode <= p.nodeRestarts && time.Since(monkeyStart) >= publishing*time.Duration(nextNode)/time.Duration(p.nodeRestarts+1) {
				n := rng.IntN(len(cluster.nodes))
				t.Logf("%6.1fs kill NATS node %s", time.Since(started).Seconds(), cluster.nodes[n].name)
				cluster.restart(t, n, p.nodeDown)
				t.Logf("%6.1fs NATS node %s is back", time.Since(started).Seconds(), cluster.nodes[n].name)
				st.nodeRestarts++
				nextNode++
				continue
			}
			_ = backoff.Sleep(ctx, between(rng, p.killEvery))
			if victim := f.kill(rng, between(rng, p.downFor)); victim != "" {
				t.Logf("%6.1fs killed and restarted %s", time.Since(started).Seconds(), victim)
				st.kills[kindOf(victim)]++
			}
			continue
		}
		break
	}
	published.Wait()
	if t.Failed() {
		return
	}

	// Wait until every message has its last reply, restarting processes
	// that exit on their own as an orchestrator would.
	pubs := allMessages(p)
	var out *outbound
	lastN, lastChange := -1, time.Now()
	for {
		f.supervise()
		out = readOutbound(ctx, t, b)
		n := out.answered(pubs)
		if n == total {
			break
		}
		if n != lastN {
			t.Logf("%6.1fs %d of %d messages answered", time.Since(started).Seconds(), n, total)
			lastN, lastChange = n, time.Now()
		}
		if time.Since(lastChange) > 60*time.Second || ctx.Err() != nil {
			cluster.dump(t, b)
			var missing []string
			for id := range pubs {
				if out.last[id] == 0 {
					missing = append(missing, id)
				}
			}
			slices.Sort(missing)
			t.Logf("unanswered: %v", missing)
			f.dumpTurns()
			t.Errorf("no progress for %s: %d of %d messages answered", time.Since(lastChange).Round(time.Second), n, total)
			break
		}
		_ = backoff.Sleep(ctx, 2*time.Second)
	}
	// Let late duplicates, if any, reach the stream before counting; the
	// count gets its own time, even when the run ran out of it.
	vctx, vcancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer vcancel()
	ctx = vctx
	_ = backoff.Sleep(ctx, 3*time.Second)
	out = readOutbound(ctx, t, b)
	hist := readHistory(ctx, t, b)

	st.messages = total
	st.check(pubs, out, hist, model.order())
	st.dlq = streamMsgs(ctx, t, b, b.Space.DeadLetterStream())
	st.inboundLeft = streamMsgs(ctx, t, b, b.Space.InboundStream())
	st.modelRequests = model.srv.RequestCount()
	st.elapsed = time.Since(started)
	t.Log("\n" + st.String())
	if bad := cluster.replicaProblems(ctx, b, 3); len(bad) > 0 {
		t.Errorf("streams not at 3 current replicas at the end: %s", strings.Join(bad, "; "))
	}
	if !st.ok() {
		t.Errorf("chaos broke an invariant (seed %d):\n%s", seed, st.problems())
	}
}

// --- load and model ---------------------------------------------------

const channel = "chaos"

func msgID(s, n int) string { return fmt.Sprintf("s%d-%d", s, n) }

// publish puts message n of session s on the inbound subject, as the
// channel-gateway does, retrying while the cluster elects a leader.
func publish(ctx context.Context, b *bus.Bus, s, n int) error {
	in := &nanofleetv1.InboundMessage{
		Id: msgID(s, n), Channel: channel, ChatId: fmt.Sprint("s", s), SenderId: "chaos",
		Content: fmt.Sprintf("s%d %d", s, n), Kind: nanofleetv1.InboundKind_INBOUND_KIND_USER, ReceivedAt: timestamppb.Now(),
	}
	data, err := proto.Marshal(in)
	if err != nil {
		return err
	}
	return backoff.Retry{Try: 3 * time.Second, Again: always, Wait: backoff.Backoff{Min: 200 * time.Millisecond, Max: 200 * time.Millisecond}.Delay}.
		Do(ctx, func(ctx context.Context) error {
			m := nats.NewMsg(b.Space.Inbound(channel, in.GetChatId()))
			m.Data = data
			m.Header.Set(nats.MsgIdHdr, channel+":"+in.GetId())
			_, err := b.JS.PublishMsg(ctx, m)
			return err
		})
}

// sent is one published message.
type sent struct{ s, n int }

func allMessages(p plan) map[string]sent {
	m := make(map[string]sent, p.sessions*p.perSession)
	for s := range p.sessions {
		for n := range p.perSession {
			m[msgID(s, n)] = sent{s, n}
		}
	}
	return m
}

// model is the fake model: it records the order in which each session's
// messages reach it, and gives every fourth message a read_file call.
type model struct {
	srv  *llmtest.Server
	mu   sync.Mutex
	seen map[int][]int
}

func newModel(t *testing.T, latency time.Duration) *model {
	m := &model{srv: llmtest.NewServer(t, llmtest.WithLatency(latency), llmtest.WithMaxRecorded(0)), seen: map[int][]int{}}
	m.srv.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		var s, n int
		text := r.LastUserText()
		if _, err := fmt.Sscanf(text, "s%d %d", &s, &n); err != nil {
			return llmtest.Text("?")
		}
		m.mu.Lock()
		m.seen[s] = append(m.seen[s], n)
		m.mu.Unlock()
		if n%4 == 0 && r.LastMessage().Role == "user" {
			return llmtest.ToolCalls(llmtest.Call("read_file", `{"path":"chaos.txt"}`))
		}
		return llmtest.Text("ack " + text)
	})
	return m
}

func (m *model) URL() string { return m.srv.URL() }

func (m *model) order() map[int][]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int][]int, len(m.seen))
	for s, ns := range m.seen {
		out[s] = slices.Clone(ns)
	}
	return out
}

// --- processes --------------------------------------------------------

const (
	kindWorker = "agent-worker"
	kindRunner = "tool-runner"
)

func kindOf(victim string) string {
	if strings.HasPrefix(victim, kindRunner) {
		return kindRunner
	}
	return kindWorker
}

// fleetProcs are the worker and tool-runner processes, by slot.
type fleetProcs struct {
	t       *testing.T
	bins    *fleettest.Binaries
	common  []string
	workers []*fleettest.Proc
	runners []*fleettest.Proc
	gen     int
	// onCrash is told about a process that exited without being killed.
	onCrash func(name, output string)
}

// dumpTurns makes every worker print its goroutines (SIGQUIT) and logs
// those running a turn: where a stuck turn waits.
func (f *fleetProcs) dumpTurns() {
	for _, w := range f.workers {
		before := len(w.Output())
		_ = w.Signal(syscall.SIGQUIT)
		w.Wait(5 * time.Second)
		dump := w.Output()[before:]
		for g := range strings.SplitSeq(dump, "\n\n") {
			if strings.Contains(g, "(*turn)") {
				f.t.Logf("%s: %s", w.Name, g)
			}
		}
	}
}

// supervise restarts the processes that exited on their own.
func (f *fleetProcs) supervise() {
	for _, group := range []struct {
		kind  string
		procs []*fleettest.Proc
	}{{kindWorker, f.workers}, {kindRunner, f.runners}} {
		for i, p := range group.procs {
			if exited, _ := p.Wait(0); exited {
				if f.onCrash != nil {
					f.onCrash(p.Name, p.Output())
				}
				f.gen++
				group.procs[i] = f.start(group.kind, i, f.gen)
			}
		}
	}
}

// start runs the process of a slot. A restarted worker keeps its id every
// other time (as a StatefulSet pod would: it takes its leases over at
// once) and gets a new one otherwise (as a Deployment pod: its leases
// expire).
func (f *fleetProcs) start(kind string, slot, gen int) *fleettest.Proc {
	name := fmt.Sprintf("%s-%d.%d", kind, slot, gen)
	args := slices.Clone(f.common)
	if kind == kindWorker {
		id := fmt.Sprint("w", slot)
		if gen%2 == 1 {
			id = fmt.Sprintf("w%d-g%d", slot, gen)
		}
		args = append(args, "--id", id)
	}
	return fleettest.Start(f.t, name, f.bins.Path(kind), nil, args...)
}

// kill SIGKILLs a random worker or runner, waits down and starts it again.
func (f *fleetProcs) kill(rng *rand.Rand, down time.Duration) string {
	f.gen++
	i := rng.IntN(len(f.workers) + len(f.runners))
	kind, procs := kindWorker, f.workers
	if i >= len(f.workers) {
		kind, procs, i = kindRunner, f.runners, i-len(f.workers)
	}
	victim := procs[i].Name
	procs[i].Kill()
	time.Sleep(down)
	procs[i] = f.start(kind, i, f.gen)
	return victim
}

// --- the NATS cluster ---------------------------------------------------

type node struct {
	name, conf string
	port       int
	// monitor is the HTTP monitoring port (/jsz names the meta leader).
	monitor int
	proc    *fleettest.Proc
}

type natsCluster struct {
	bin   string
	nodes []*node
}

// startCluster runs n nats-server processes with JetStream, clustered
// over loopback routes.
func startCluster(t *testing.T, bin, dir string, n int) *natsCluster {
	t.Helper()
	for try := 1; ; try++ {
		c, err := tryCluster(t, bin, filepath.Join(dir, fmt.Sprint("try", try)), n)
		if err == nil {
			return c
		}
		taken := slices.ContainsFunc(c.nodes, func(nd *node) bool { return nd.proc.PortTaken() })
		if !taken || try == fleettest.PortTries {
			t.Fatal(err)
		}
		for _, nd := range c.nodes {
			nd.proc.Kill()
		}
		t.Logf("a port of the cluster was taken; starting it on new ports: %v", firstLine(err))
	}
}

// tryCluster starts n nodes on free ports and waits until each is ready.
func tryCluster(t *testing.T, bin, dir string, n int) (*natsCluster, error) {
	t.Helper()
	c := &natsCluster{bin: bin}
	// FreePort only finds a port free now: two picks before anything
	// binds may be the same (a node's monitor and route port once were,
	// and the node died after "Server is ready").
	picked := map[int]bool{}
	freePort := func() int {
		for {
			if p := bustest.FreePort(t); !picked[p] {
				picked[p] = true
				return p
			}
		}
	}
	routes := make([]string, n)
	cports := make([]int, n)
	for i := range n {
		cports[i] = freePort()
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", cports[i])
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		nd := &node{name: fmt.Sprint("n", i+1), port: freePort(), monitor: freePort()}
		nd.conf = filepath.Join(dir, nd.name+".conf")
		conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
jetstream { store_dir: %q }
cluster {
  name: chaos
  listen: 127.0.0.1:%d
  routes: [%s]
}
`, nd.name, nd.port, nd.monitor, filepath.Join(dir, nd.name), cports[i], strings.Join(routes, ", "))
		if err := os.WriteFile(nd.conf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, nd)
	}
	for _, nd := range c.nodes {
		nd.proc = fleettest.Start(t, "nats-"+nd.name, bin, nil, "-c", nd.conf)
	}
	for _, nd := range c.nodes {
		// The route port is bound after "Server is ready": a node that
		// cannot bind it dies after saying it is ready.
		if err := nd.proc.AwaitOutput(t.Context(), "Listening for route connections", 30*time.Second); err != nil {
			return c, err
		}
	}
	return c, nil
}

// firstLine is err's first line.
func firstLine(err error) string {
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}

func (c *natsCluster) urls() string { return urlsOf(c.nodes) }

// urlsOf is the nodes' client URLs, comma separated, as a --nats flag.
func urlsOf(nodes []*node) string {
	u := make([]string, len(nodes))
	for i, nd := range nodes {
		u[i] = fmt.Sprintf("nats://127.0.0.1:%d", nd.port)
	}
	return strings.Join(u, ",")
}

// connect connects to the cluster and provisions the layout with 3
// replicas, retrying until JetStream has its meta leader.
func (c *natsCluster) connect(ctx context.Context, t *testing.T) *bus.Bus {
	t.Helper()
	b, err := bus.Connect(ctx, bus.Config{URL: c.urls(), Name: "chaos"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.NC.Close() })
	layout := bustest.TestLayout()
	layout.Replicas = 3
	// Any failure is tried again, not only a transient one: a cluster
	// still forming refuses a stream for reasons of its own.
	err = backoff.Retry{Try: 10 * time.Second, Again: always, Wait: backoff.Backoff{Max: 2 * time.Second}.Wait}.
		Do(ctx, func(ctx context.Context) error { return bus.Provision(ctx, b, layout) })
	if err != nil {
		for _, nd := range c.nodes {
			t.Logf("%s's log, last lines:\n%s", nd.name, lastLines(nd.proc.Output(), 30))
		}
		t.Fatalf("provision on the cluster: %v", err)
	}
	return b
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// restart SIGKILLs node i, keeps it down for down and starts it again on
// the same store.
func (c *natsCluster) restart(t *testing.T, i int, down time.Duration) {
	nd := c.nodes[i]
	nd.proc.Kill()
	time.Sleep(down)
	nd.proc = fleettest.Start(t, "nats-"+nd.name, c.bin, nil, "-c", nd.conf)
	nd.proc.WaitOutput(t, "Server is ready", 30*time.Second)
}

// dump logs every stream's replication state, for a stuck run.
func (c *natsCluster) dump(t *testing.T, b *bus.Bus) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for name := range b.JS.StreamNames(ctx).Name() {
		s, err := b.JS.Stream(ctx, name)
		if err != nil {
			t.Logf("stream %s: %v", name, err)
			continue
		}
		info := s.CachedInfo()
		line := fmt.Sprintf("stream %s: R%d msgs %d", name, info.Config.Replicas, info.State.Msgs)
		if cl := info.Cluster; cl != nil {
			line += " leader " + cl.Leader
			for _, r := range cl.Replicas {
				line += fmt.Sprintf(" %s(current %v, lag %d)", r.Name, r.Current, r.Lag)
			}
		}
		t.Log(line)
	}
	if cons, err := b.JS.Consumer(ctx, b.Space.InboundStream(), b.Space.WorkerConsumer()); err == nil {
		ci := cons.CachedInfo()
		t.Logf("consumer workers: pending %d, ack pending %d, redelivered %d, waiting %d, delivered %d, ack floor %d",
			ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting, ci.Delivered.Stream, ci.AckFloor.Stream)
	} else {
		t.Logf("consumer workers: %v", err)
	}
	if kv, err := b.KV(ctx, bus.BucketLeases); err == nil {
		if keys, err := kv.ListKeys(ctx); err == nil {
			for k := range keys.Keys() {
				if e, err := kv.Get(ctx, k); err == nil {
					t.Logf("lease %s = %q (revision %d, created %s)", k, e.Value(), e.Revision(), e.Created().Format(time.TimeOnly))
				}
			}
		}
	}
}

// replicaProblems lists streams whose replication is not n current
// peers, asking again (for up to 30 s) while there are some: a restarted
// node may still be catching up.
func (c *natsCluster) replicaProblems(ctx context.Context, b *bus.Bus, n int) []string {
	var bad []string
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = backoff.Retry{Try: 10 * time.Second, Again: always, Wait: backoff.Backoff{Max: 2 * time.Second}.Wait}.
		Do(ctx, func(ctx context.Context) error {
			bad = bad[:0]
			names := b.JS.StreamNames(ctx)
			for name := range names.Name() {
				s, err := b.JS.Stream(ctx, name)
				if err != nil {
					bad = append(bad, fmt.Sprintf("%s: %v", name, err))
					continue
				}
				info := s.CachedInfo()
				current := 0
				if info.Cluster != nil && info.Cluster.Leader != "" {
					current = 1
					for _, r := range info.Cluster.Replicas {
						if r.Current {
							current++
						}
					}
				}
				if info.Config.Replicas != n || current != n {
					bad = append(bad, fmt.Sprintf("%s: %d replicas configured, %d current", name, info.Config.Replicas, current))
				}
			}
			// A listing cut short (its try's deadline) must not read as
			// no problem.
			if err := names.Err(); err != nil {
				bad = append(bad, fmt.Sprintf("list streams: %v", err))
			}
			if len(bad) > 0 {
				return errors.New(strings.Join(bad, "; "))
			}
			return nil
		})
	return bad
}

// --- reading the streams ------------------------------------------------

// outbound is what the outbound stream holds for the chaos channel.
type outbound struct {
	// last counts the replies ending a turn (last_of_turn) per inbound id;
	// finals the FINAL ones, errors the ERROR ones.
	last, finals, errors map[string]int
	// order is each session's last-of-turn replies in stream order.
	order map[string][]string
}

func (o *outbound) answered(pubs map[string]sent) int {
	n := 0
	for id := range pubs {
		if o.last[id] > 0 {
			n++
		}
	}
	return n
}

func readOutbound(ctx context.Context, t *testing.T, b *bus.Bus) *outbound {
	o := &outbound{last: map[string]int{}, finals: map[string]int{}, errors: map[string]int{}, order: map[string][]string{}}
	readStream(ctx, t, b.JS, b.Space.OutboundStream(), func(data []byte) {
		m := &nanofleetv1.OutboundMessage{}
		if proto.Unmarshal(data, m) != nil || m.GetChannel() != channel || !m.GetLastOfTurn() {
			return
		}
		id := m.GetReplyTo()
		o.last[id]++
		switch m.GetKind() {
		case nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL:
			o.finals[id]++
		case nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR:
			o.errors[id]++
		}
		o.order[m.GetSessionKey()] = append(o.order[m.GetSessionKey()], id)
	})
	return o
}

// readHistory returns each session's TurnRecords' inbound ids in stream
// order.
func readHistory(ctx context.Context, t *testing.T, b *bus.Bus) map[string][]string {
	h := map[string][]string{}
	readStream(ctx, t, b.JS, b.Space.HistoryStream(), func(data []byte) {
		rec := &nanofleetv1.TurnRecord{}
		if proto.Unmarshal(data, rec) != nil {
			t.Errorf("undecodable TurnRecord in the history stream")
			return
		}
		h[rec.GetSessionKey()] = append(h[rec.GetSessionKey()], rec.GetInboundId())
	})
	return h
}

// readStream calls each with every message of a stream, in order.
func readStream(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string, each func([]byte)) {
	t.Helper()
	// A request sent just as the client reconnects to another node is
	// lost: each try gets its own deadline, and a read cut short starts
	// over (tryReadStream calls each only once it has read to the end).
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := backoff.Retry{Try: 20 * time.Second, Again: always, Wait: backoff.Backoff{Min: time.Second, Max: time.Second}.Wait}.
		Do(ctx, func(ctx context.Context) error { return tryReadStream(ctx, js, stream, each) })
	if err != nil {
		t.Fatalf("read stream %s: %v", stream, err)
	}
}

func tryReadStream(ctx context.Context, js jetstream.JetStream, stream string, each func([]byte)) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	var buf [][]byte
	for {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(3*time.Second))
		if err != nil {
			return err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			buf = append(buf, m.Data())
			meta, err := m.Metadata()
			if err != nil {
				return err
			}
			if meta.Sequence.Stream >= last {
				for _, d := range buf {
					each(d)
				}
				return nil
			}
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if got == 0 {
			return fmt.Errorf("stopped before sequence %d", last)
		}
	}
}

func streamMsgs(ctx context.Context, t *testing.T, b *bus.Bus, stream string) uint64 {
	// A request sent as the client moves to another node can be lost:
	// each try gets a deadline of its own.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var msgs uint64
	err := backoff.Retry{Try: 5 * time.Second, Again: always, Wait: backoff.Backoff{Min: 500 * time.Millisecond, Max: 500 * time.Millisecond}.Delay}.
		Do(ctx, func(ctx context.Context) error {
			s, err := b.JS.Stream(ctx, stream)
			if err != nil {
				return err
			}
			info, err := s.Info(ctx)
			if err != nil {
				return err
			}
			msgs = info.State.Msgs
			return nil
		})
	if err != nil {
		t.Errorf("stream %s: %v", stream, err)
	}
	return msgs
}

// --- the verdict --------------------------------------------------------

type stats struct {
	messages     int
	kills        map[string]int
	nodeRestarts int
	elapsed      time.Duration

	lost, duplicated, reordered, errored  int
	histLost, histDup, histReordered      int
	modelReordered, modelMissing          int
	dlq, inboundLeft                      uint64
	modelRequests                         int
	lostIDs, dupIDs, reorderedS, histBadS []string
	crashes                               []string
}

func (s *stats) check(pubs map[string]sent, out *outbound, hist map[string][]string, seen map[int][]int) {
	for id := range pubs {
		switch n := out.last[id]; {
		case n == 0:
			s.lost++
			s.lostIDs = append(s.lostIDs, id)
		case n > 1:
			s.duplicated += n - 1
			s.dupIDs = append(s.dupIDs, id)
		}
		s.errored += out.errors[id]
	}
	// Per session: replies, history and model calls in message order.
	sessions := map[int]bool{}
	for _, p := range pubs {
		sessions[p.s] = true
	}
	for sess := range sessions {
		key := fmt.Sprintf("%s:s%d", channel, sess)
		if inv := inversions(numbers(pubs, out.order[key])); inv > 0 {
			s.reordered += inv
			s.reorderedS = append(s.reorderedS, fmt.Sprintf("%s replies %v", key, numbers(pubs, out.order[key])))
		}
		h := numbers(pubs, hist[key])
		distinct := slices.Compact(slices.Sorted(slices.Values(h)))
		want := 0
		for _, p := range pubs {
			if p.s == sess {
				want++
			}
		}
		lost, dup, inv := want-len(distinct), len(h)-len(distinct), inversions(h)
		s.histLost += lost
		s.histDup += dup
		s.histReordered += inv
		if lost+dup+inv > 0 {
			s.histBadS = append(s.histBadS, fmt.Sprintf("%s history %v", key, h))
		}
		m := slices.Compact(seen[sess]) // a resumed turn or a tool step asks again
		s.modelReordered += inversions(m)
		s.modelMissing += want - len(slices.Compact(slices.Sorted(slices.Values(m))))
	}
	slices.Sort(s.lostIDs)
	slices.Sort(s.dupIDs)
}

// numbers maps inbound ids to message numbers.
func numbers(pubs map[string]sent, ids []string) []int {
	out := make([]int, 0, len(ids))
	for _, id := range ids {
		if p, ok := pubs[id]; ok {
			out = append(out, p.n)
		}
	}
	return out
}

// inversions counts places where a number is not above the one before.
func inversions(ns []int) int {
	n := 0
	for i := 1; i < len(ns); i++ {
		if ns[i] < ns[i-1] {
			n++
		}
	}
	return n
}

func (s *stats) ok() bool {
	return s.lost+s.duplicated+s.reordered+s.errored+s.histLost+s.histDup+s.histReordered+s.modelReordered+s.modelMissing == 0 &&
		s.dlq == 0 && s.inboundLeft == 0
}

func (s *stats) String() string {
	var b strings.Builder
	w := func(k string, v any) { fmt.Fprintf(&b, "  %-34s %v\n", k, v) }
	b.WriteString("chaos figures\n")
	w("messages", s.messages)
	w("worker kills (SIGKILL) + restarts", s.kills[kindWorker])
	w("tool-runner kills (SIGKILL) + restarts", s.kills[kindRunner])
	w("NATS node kills (SIGKILL) + restarts", s.nodeRestarts)
	w("processes that exited on their own", len(s.crashes))
	w("model requests", s.modelRequests)
	w("lost (no final reply)", s.lost)
	w("duplicated final replies", s.duplicated)
	w("reordered final replies", s.reordered)
	w("error replies", s.errored)
	w("history entries lost", s.histLost)
	w("history entries duplicated", s.histDup)
	w("history entries reordered", s.histReordered)
	w("model calls out of order", s.modelReordered)
	w("messages never seen by the model", s.modelMissing)
	w("dead letters", s.dlq)
	w("inbound messages left", s.inboundLeft)
	w("elapsed", s.elapsed.Round(time.Second))
	return b.String()
}

func (s *stats) problems() string {
	var b strings.Builder
	list := func(k string, v []string) {
		if len(v) > 0 {
			if len(v) > 20 {
				v = append(v[:20:20], fmt.Sprintf("… %d more", len(v)-20))
			}
			fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(v, ", "))
		}
	}
	list("lost", s.lostIDs)
	list("duplicated", s.dupIDs)
	list("reordered", s.reorderedS)
	list("history", s.histBadS)
	b.WriteString(s.String())
	return b.String()
}

// --- helpers ------------------------------------------------------------

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func between(rng *rand.Rand, r [2]time.Duration) time.Duration {
	return r[0] + time.Duration(rng.Int64N(int64(r[1]-r[0])+1))
}

// always tries every failure again: under chaos a request fails for
// reasons of the moment (a node down, a leader moving, a cluster still
// forming), whatever the error says.
func always(error) bool { return true }
