package toolclient_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/toolclient"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// fakeFleet is a client and a hand-written runner speaking the protocol.
type fakeFleet struct {
	t      *testing.T
	runner *bus.Bus
	client *toolclient.Client
}

func newFleet(t *testing.T, opts ...toolclient.Option) *fakeFleet {
	t.Helper()
	srv := bustest.StartServer(t)
	f := &fakeFleet{t: t, runner: srv.Connect(t, "")}
	c, err := toolclient.New(srv.Connect(t, ""), append([]toolclient.Option{toolclient.WithLivenessTimeout(300 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.client = c
	return f
}

// catalog serves definitions (given unsorted).
func (f *fakeFleet) catalog(defs ...*nanofleetv1.ToolDefinition) {
	data, _ := proto.Marshal(&nanofleetv1.ToolCatalog{Tools: defs})
	f.serve(f.runner.Space.ToolCatalog(), func(m *nats.Msg, _ int) { m.Respond(data) })
}

// tool serves a tool; handle gets the request and the delivery count.
func (f *fakeFleet) tool(name string, handle func(m *nats.Msg, n int)) {
	f.serve(f.runner.Space.ToolCall(name), handle)
}

func (f *fakeFleet) serve(subj string, handle func(m *nats.Msg, n int)) {
	var n atomic.Int32
	sub, err := f.runner.NC.QueueSubscribe(subj, toolclient.QueueGroup, func(m *nats.Msg) {
		k := int(n.Add(1))
		go handle(m, k)
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.runner.NC.Flush()
	f.t.Cleanup(func() { sub.Unsubscribe() })
}

func (f *fakeFleet) call(ctx context.Context, name string) (*nanofleetv1.ToolResult, error) {
	return f.client.Call(ctx, &nanofleetv1.ToolRequest{CallId: "c1", Name: name, ArgumentsJson: "{}"})
}

// send answers on m's inbox; false once the connection is gone (the
// test is over).
func send(_ *testing.T, m *nats.Msg, status string, res *nanofleetv1.ToolResult) bool {
	out := nats.NewMsg(m.Reply)
	out.Header.Set(toolclient.HeaderStatus, status)
	out.Header.Set(toolclient.HeaderRunner, "fake")
	if res != nil {
		out.Data, _ = proto.Marshal(res)
	}
	return m.RespondMsg(out) == nil
}

func TestHeartbeatsKeepACallAlive(t *testing.T) {
	f := newFleet(t)
	var timeoutMs atomic.Int64
	f.tool("exec", func(m *nats.Msg, _ int) {
		var req nanofleetv1.ToolRequest
		proto.Unmarshal(m.Data, &req)
		timeoutMs.Store(req.GetTimeoutMs())
		// Three times the liveness timeout, with heartbeats.
		for range 18 {
			if !send(t, m, toolclient.StatusRunning, nil) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		send(t, m, toolclient.StatusDone, &nanofleetv1.ToolResult{Content: "done"})
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := f.call(ctx, "exec")
	if err != nil || res.GetContent() != "done" || res.GetCallId() != "c1" {
		t.Fatalf("%v %v", res, err)
	}
	if ms := timeoutMs.Load(); ms <= 0 || ms > 20_000 {
		t.Errorf("timeout_ms sent = %d, want the context's remaining time", ms)
	}
}

func TestLostRunner(t *testing.T) {
	f := newFleet(t)
	f.catalog(&nanofleetv1.ToolDefinition{Name: "write_file", Exclusive: true}, &nanofleetv1.ToolDefinition{Name: "read_file", ReadOnly: true})
	var reads, writes atomic.Int32
	// The first delivery "dies" after one heartbeat; later ones answer.
	f.tool("read_file", func(m *nats.Msg, n int) {
		reads.Add(1)
		send(t, m, toolclient.StatusRunning, nil)
		if n == 1 {
			return
		}
		send(t, m, toolclient.StatusDone, &nanofleetv1.ToolResult{Content: "file content"})
	})
	f.tool("write_file", func(m *nats.Msg, n int) {
		writes.Add(1)
		send(t, m, toolclient.StatusRunning, nil)
	})
	ctx := t.Context()
	res, err := f.call(ctx, "read_file")
	if err != nil || res.GetIsError() || res.GetContent() != "file content" || reads.Load() != 2 {
		t.Errorf("read_file: %v %v after %d deliveries", res, err, reads.Load())
	}
	res, err = f.call(ctx, "write_file")
	if err != nil || res.GetErrorKind() != nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_INTERRUPTED ||
		!strings.Contains(res.GetContent(), "write_file was interrupted") || !strings.Contains(res.GetContent(), "not retried") {
		t.Errorf("write_file: %v %v", res, err)
	}
	if n := writes.Load(); n != 1 {
		t.Errorf("write_file delivered %d times", n)
	}
}

func TestRejectedCallGoesElsewhere(t *testing.T) {
	f := newFleet(t)
	f.tool("exec", func(m *nats.Msg, n int) {
		if n == 1 {
			send(t, m, toolclient.StatusRejected, nil)
			return
		}
		send(t, m, toolclient.StatusRunning, nil)
		send(t, m, toolclient.StatusDone, &nanofleetv1.ToolResult{Content: "ran once"})
	})
	res, err := f.call(t.Context(), "exec")
	if err != nil || res.GetContent() != "ran once" {
		t.Fatalf("%v %v", res, err)
	}
}

func TestNoResponders(t *testing.T) {
	f := newFleet(t)
	res, err := f.call(t.Context(), "read_file")
	if err != nil || res.GetErrorKind() != nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_FAILED || !strings.Contains(res.GetContent(), "no tool runner is available") {
		t.Fatalf("no runner at all: %v %v", res, err)
	}
	if _, err := f.client.Catalog(t.Context()); !errors.Is(err, toolclient.ErrNoRunners) {
		t.Errorf("catalog: %v", err)
	}
	f.catalog(&nanofleetv1.ToolDefinition{Name: "write_file"}, &nanofleetv1.ToolDefinition{Name: "exec"})
	res, err = f.call(t.Context(), "rm_rf")
	if err != nil || res.GetErrorKind() != nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_UNKNOWN_TOOL || !strings.Contains(res.GetContent(), `unknown tool "rm_rf". Available tools: exec, write_file.`) {
		t.Fatalf("unknown tool: %v %v", res, err)
	}
}

func TestDeadlinesAndCancellation(t *testing.T) {
	f := newFleet(t, toolclient.WithCallTimeout(400*time.Millisecond))
	f.tool("exec", func(m *nats.Msg, _ int) {
		// A call that runs for 5 s, heartbeating: only a deadline or a
		// cancel ends it.
		for range 100 {
			if !send(t, m, toolclient.StatusRunning, nil) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	res, err := f.call(t.Context(), "exec")
	if err != nil || res.GetErrorKind() != nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_TIMEOUT {
		t.Errorf("own deadline: %v %v", res, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	if res, err := f.call(ctx, "exec"); !errors.Is(err, context.Canceled) || res != nil {
		t.Errorf("cancelled: %v %v", res, err)
	}
}

func TestBadResponse(t *testing.T) {
	f := newFleet(t)
	f.tool("exec", func(m *nats.Msg, _ int) {
		out := nats.NewMsg(m.Reply)
		out.Header.Set(toolclient.HeaderStatus, toolclient.StatusDone)
		out.Data = []byte{0xff, 0xff, 0xff}
		m.RespondMsg(out)
	})
	if _, err := f.call(t.Context(), "exec"); !errors.Is(err, toolclient.ErrBadResponse) {
		t.Errorf("err = %v", err)
	}
}

// catalogNames asks the client for the catalog and lists its tools, each
// as show writes it, comma separated.
func (f *fakeFleet) catalogNames(t *testing.T, show func(*nanofleetv1.ToolDefinition) string) string {
	t.Helper()
	defs, err := f.client.Catalog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = show(d)
	}
	return strings.Join(names, ",")
}

func name(d *nanofleetv1.ToolDefinition) string { return d.GetName() }

func TestCatalogSorted(t *testing.T) {
	f := newFleet(t)
	f.catalog(&nanofleetv1.ToolDefinition{Name: "web_fetch"}, &nanofleetv1.ToolDefinition{Name: "exec"}, &nanofleetv1.ToolDefinition{Name: "grep"})
	if names := f.catalogNames(t, name); names != "exec,grep,web_fetch" {
		t.Errorf("catalog order %v", names)
	}
}

func TestOptionsValidate(t *testing.T) {
	b := bustest.StartJetStream(t)
	for _, opt := range []toolclient.Option{
		toolclient.WithLivenessTimeout(time.Millisecond),
		toolclient.WithCallTimeout(0),
		toolclient.WithMaxRetries(-1),
		toolclient.WithAllRunners(-1),
	} {
		if _, err := toolclient.New(b, opt); !errors.Is(err, toolclient.ErrInvalidOption) {
			t.Errorf("option accepted: %v", err)
		}
	}
}

// TestCatalogMergesRunners: every runner answers the catalog; the client
// returns the union, and a tool two runners define differently gets the
// same definition whichever answers first (each order is tried, so a
// "first answer wins" merge fails one of them).
func TestCatalogMergesRunners(t *testing.T) {
	runner1 := []*nanofleetv1.ToolDefinition{{Name: "exec"}, {Name: "mcp_a_x", Description: "from runner 1"}}
	runner2 := []*nanofleetv1.ToolDefinition{{Name: "exec"}, {Name: "mcp_b_y"}, {Name: "mcp_a_x", Description: "from runner 2"}}
	for _, tc := range []struct {
		name          string
		first, second []*nanofleetv1.ToolDefinition
	}{
		{"runner 1 answers first", runner1, runner2},
		{"runner 2 answers first", runner2, runner1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t)
			// answer subscribes a runner that answers once after is
			// closed (nil: at once), then closes done (if not nil).
			answer := func(defs []*nanofleetv1.ToolDefinition, after, done chan struct{}) {
				data, _ := proto.Marshal(&nanofleetv1.ToolCatalog{Tools: defs})
				sub, err := f.runner.NC.Subscribe(f.runner.Space.ToolCatalog(), func(m *nats.Msg) {
					if after != nil {
						select {
						case <-after:
						case <-time.After(5 * time.Second):
						}
					}
					m.Respond(data)
					if done != nil {
						select {
						case <-done:
						default:
							close(done)
						}
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sub.Unsubscribe() })
			}
			firstDone := make(chan struct{})
			answer(tc.first, nil, firstDone)
			answer(tc.second, firstDone, nil) // right after the first
			answer(nil, nil, nil)             // a runner without tools
			f.runner.NC.Flush()
			nameDesc := func(d *nanofleetv1.ToolDefinition) string { return d.GetName() + "=" + d.GetDescription() }
			if got := f.catalogNames(t, nameDesc); got != "exec=,mcp_a_x=from runner 1,mcp_b_y=" {
				t.Fatalf("merged catalog %s", got)
			}
		})
	}
}

// TestCatalogAllRunners: told how many runners the fleet has, the client
// stops gathering when that many have answered, so a slower runner's
// tools (which a fleet of one runner cannot have) are not waited for.
func TestCatalogAllRunners(t *testing.T) {
	tests := []struct {
		name      string
		runners   int
		wantTools string
	}{
		{"window waited out", 0, "exec,mcp_slow_x"},
		{"one runner: first answer only", 1, "exec"},
		{"two runners: both", 2, "exec,mcp_slow_x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t, toolclient.WithAllRunners(tt.runners))
			answer := func(delay time.Duration, defs ...*nanofleetv1.ToolDefinition) {
				data, _ := proto.Marshal(&nanofleetv1.ToolCatalog{Tools: defs})
				sub, err := f.runner.NC.Subscribe(f.runner.Space.ToolCatalog(), func(m *nats.Msg) {
					time.Sleep(delay) // a runner slower to answer than the others
					m.Respond(data)
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sub.Unsubscribe() })
			}
			answer(0, &nanofleetv1.ToolDefinition{Name: "exec"})
			answer(20*time.Millisecond, &nanofleetv1.ToolDefinition{Name: "mcp_slow_x"})
			f.runner.NC.Flush()
			if got := f.catalogNames(t, name); got != tt.wantTools {
				t.Errorf("tools %s, want %s", got, tt.wantTools)
			}
		})
	}
}

// gatedCatalog serves the catalog on f's runner: each request is signalled
// on the returned channel and answered once the test sends on gate, with
// the tools *tools names, or with bytes no client can read while *broken.
func (f *fakeFleet) gatedCatalog(gate <-chan struct{}, tools *atomic.Pointer[[]string], broken *atomic.Bool) <-chan struct{} {
	calls := make(chan struct{}, 10)
	f.serve(f.runner.Space.ToolCatalog(), func(m *nats.Msg, _ int) {
		calls <- struct{}{}
		select {
		case <-gate:
		case <-f.t.Context().Done():
			return
		}
		if broken.Load() {
			m.Respond([]byte{0xff, 0xff, 0xff})
			return
		}
		var cat nanofleetv1.ToolCatalog
		for _, n := range *tools.Load() {
			cat.Tools = append(cat.Tools, &nanofleetv1.ToolDefinition{Name: n})
		}
		data, _ := proto.Marshal(&cat)
		m.Respond(data)
	})
	return calls
}

// TestCachedCatalogServesStaleWhileRefreshing: until the runners have
// answered, CachedCatalog fails and the next call asks again; once they
// have, a caller never waits for the catalog: an old one is served and
// refreshed in the background, and a failed refresh keeps the runners'
// tools (and the next call tries again).
func TestCachedCatalogServesStaleWhileRefreshing(t *testing.T) {
	f := newFleet(t, toolclient.WithAllRunners(1))
	ctx := t.Context()
	names := func(defs []*nanofleetv1.ToolDefinition) string {
		var out []string
		for _, d := range defs {
			out = append(out, d.GetName())
		}
		return strings.Join(out, ",")
	}
	get := func() string {
		t.Helper()
		defs, err := f.client.CachedCatalog(ctx)
		if err != nil {
			t.Fatalf("cached catalog: %v", err)
		}
		return names(defs)
	}

	if _, err := f.client.CachedCatalog(ctx); !errors.Is(err, toolclient.ErrNoRunners) {
		t.Fatalf("cached catalog without runners: %v, want ErrNoRunners", err)
	}
	gate := make(chan struct{})
	var tools atomic.Pointer[[]string]
	var broken atomic.Bool
	tools.Store(&[]string{"read_file"})
	calls := f.gatedCatalog(gate, &tools, &broken)

	first := make(chan string)
	go func() {
		defs, err := f.client.CachedCatalog(ctx)
		if err != nil {
			t.Errorf("first cached catalog: %v", err)
		}
		first <- names(defs)
	}()
	bustest.Receive(t, calls, 10*time.Second)
	gate <- struct{}{} // the first catalog is waited for
	if got := bustest.Receive(t, first, 10*time.Second); got != "read_file" {
		t.Fatalf("first catalog = %v, want read_file", got)
	}
	a, _ := f.client.CachedCatalog(ctx)
	b, _ := f.client.CachedCatalog(ctx)
	if &a[0] != &b[0] {
		t.Errorf("a cached catalog within its lifetime is not the same slice")
	}

	tools.Store(&[]string{"exec", "read_file"})
	toolclient.AgeCatalog(f.client, toolclient.CatalogTTL)
	if got := get(); got != "read_file" { // the refresh is held at the gate
		t.Fatalf("catalog during a refresh = %v, want the stale read_file", got)
	}
	bustest.Receive(t, calls, 10*time.Second)
	gate <- struct{}{}
	bustest.Eventually(t, 10*time.Second, func() error {
		if got := get(); got != "exec,read_file" {
			return fmt.Errorf("catalog after the refresh = %v, want exec,read_file", got)
		}
		return nil
	})

	broken.Store(true)
	toolclient.AgeCatalog(f.client, toolclient.CatalogTTL)
	_ = get()
	bustest.Receive(t, calls, 10*time.Second)
	gate <- struct{}{}
	// The failed refresh has ended when a call starts the next one.
	bustest.Eventually(t, 10*time.Second, func() error {
		if got := get(); got != "exec,read_file" {
			t.Fatalf("catalog after a failed refresh = %v, want the runners' tools kept", got)
		}
		select {
		case <-calls:
			return nil
		default:
			return errors.New("no refresh after the failed one")
		}
	})
}
