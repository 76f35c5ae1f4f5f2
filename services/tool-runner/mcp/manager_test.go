package mcp_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"

	"github.com/nanofleet/nanofleet/services/tool-runner/mcp"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox/sandboxtest"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// recorder is a Publisher that reports every publication.
type recorder struct {
	mu     sync.Mutex
	latest map[string][]string
	events chan string // server names, one per Publish
}

func newRecorder() *recorder {
	return &recorder{latest: map[string][]string{}, events: make(chan string, 1000)}
}

func (r *recorder) Publish(_ context.Context, server string, defs []toolschema.Tool) error {
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	r.mu.Lock()
	r.latest[server] = names
	r.mu.Unlock()
	r.events <- server
	return nil
}

func (r *recorder) names(server string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest[server]
}

// await waits for a publication of server for which ok holds.
func (r *recorder) await(t *testing.T, server string, ok func(names []string) bool) []string {
	t.Helper()
	if names := r.names(server); ok(names) {
		return names
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case s := <-r.events:
			if names := r.names(s); s == server && ok(names) {
				return names
			}
		case <-deadline:
			t.Fatalf("no publication of %s as expected; last: %v", server, r.names(server))
		}
	}
}

func testLog(t testing.TB) *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("MCP_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// baseDir is a temp dir the sandbox's unprivileged user can traverse.
func baseDir(t testing.TB) string { return sandboxtest.BaseDir(t) }

// testSandbox is the default sandbox config (a Go test binary needs more
// than sandboxtest's 1 GB of address space) in the given mode.
func testSandbox(mode sandbox.Mode) sandbox.Config {
	c := sandbox.DefaultConfig()
	c.Sandbox = mode
	c.TmpSizeMB = 32
	return c
}

func sandboxNone() sandbox.Config { return testSandbox(sandbox.ModeNone) }

func fake(mods ...func(*mcp.ServerConfig)) mcp.ServerConfig {
	c := mcp.ServerConfig{Command: fakeBinary, Env: map[string]string{fakeEnv: "1"}}
	for _, m := range mods {
		m(&c)
	}
	return c
}

func startManager(t *testing.T, sb sandbox.Config, servers map[string]mcp.ServerConfig, opts ...mcp.Option) (*mcp.Manager, *recorder) {
	t.Helper()
	m, err := mcp.New(mcp.Options{Servers: servers, Sandbox: sb, DataDir: filepath.Join(baseDir(t), "ws-mcp")},
		append([]mcp.Option{mcp.WithLogger(testLog(t)), mcp.WithConnectTimeout(20 * time.Second), mcp.WithStartWait(30 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, m)
	rec := newRecorder()
	m.Serve(t.Context(), rec)
	return m, rec
}

// runManager runs m until the test ends and waits until its servers'
// first attempts are in (within 40 s); stop ends Run early and returns
// its error (Run must return within 15 s).
func runManager(t *testing.T, m *mcp.Manager) (stop func() error) {
	t.Helper()
	return svctest.Run(t, m.Run, svctest.Ready(m.Started(), 40*time.Second), svctest.StopWithin(15*time.Second))
}

// call runs a published tool as the runner would.
func call(t *testing.T, m *mcp.Manager, name, args string) (tools.Result, error) {
	t.Helper()
	return served(t, m, name)(args)
}

// served returns a function calling the published tool name as the
// runner would, failing the test at once if the tool is not served. The
// function does not call t.Fatal: a goroutine other than the test's may
// call it.
func served(t *testing.T, m *mcp.Manager, name string) func(args string) (tools.Result, error) {
	t.Helper()
	tool, schema, ok := m.Get(name)
	if !ok {
		t.Fatalf("tool %s not served; served: %v", name, m.Names())
	}
	return func(args string) (tools.Result, error) {
		parsed, err := schema.Parse(args)
		if err != nil {
			return tools.Result{}, err
		}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		return tool.Run(ctx, &tools.Call{ID: "c1", SessionKey: "test:1", Args: parsed, Log: testLog(t)})
	}
}

func mustCall(t *testing.T, m *mcp.Manager, name, args, want string) {
	t.Helper()
	res, err := call(t, m, name, args)
	if err != nil || !strings.Contains(res.Text, want) {
		t.Fatalf("%s(%s) = %q, %v; want %q", name, args, res.Text, err, want)
	}
}

func TestFakeServerToolsResourcesPrompts(t *testing.T) {
	m, _ := startManager(t, sandboxNone(), map[string]mcp.ServerConfig{"fake": fake()})
	want := []string{
		"mcp_fake_bad", "mcp_fake_die", "mcp_fake_dotted_name", "mcp_fake_echo", "mcp_fake_env", "mcp_fake_fail",
		"mcp_fake_garbage", "mcp_fake_hang", "mcp_fake_prompt_greet", "mcp_fake_read",
		"mcp_fake_resource_greeting", "mcp_fake_resource_item",
	}
	if got := m.Names(); !slices.Equal(got, want) {
		t.Fatalf("tools %v\nwant  %v", got, want)
	}
	mustCall(t, m, "mcp_fake_echo", `{"message":"hi"}`, "echo: hi")
	mustCall(t, m, "mcp_fake_dotted_name", ``, "dotted")
	mustCall(t, m, "mcp_fake_resource_greeting", ``, "content of fake://greeting")
	mustCall(t, m, "mcp_fake_resource_item", `{"id":"42"}`, "content of fake://items/42")
	mustCall(t, m, "mcp_fake_prompt_greet", `{"who":"Ada"}`, "Say hello to Ada")

	if _, err := call(t, m, "mcp_fake_prompt_greet", `{}`); !errors.Is(err, toolschema.ErrInvalidArguments) {
		t.Errorf("prompt without its required argument: %v", err)
	}
	_, err := call(t, m, "mcp_fake_fail", ``)
	var te *mcp.ToolError
	if !errors.As(err, &te) || te.Text != "it broke" || tools.ErrorKind(err) != nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_FAILED {
		t.Errorf("a tool reporting an error: %v", err)
	}
	for _, d := range m.Definitions() {
		wantRO := d.Name == "mcp_fake_env" || strings.Contains(d.Name, "_resource_") || strings.Contains(d.Name, "_prompt_")
		if d.ReadOnly != wantRO {
			t.Errorf("%s read-only = %v", d.Name, d.ReadOnly)
		}
	}
	st := m.Status()
	if len(st) != 1 || st[0].State != mcp.StateReady || st[0].Tools != len(want) || st[0].PID == 0 || st[0].Transport != mcp.TransportStdio {
		t.Errorf("status %+v", st)
	}
}

// TestHangingAndMalformedDoNotBlock: a call the server never answers times
// out at toolTimeout with a time-out the model can read, while other
// calls of the same server, malformed answers included, go on.
func TestHangingAndMalformedDoNotBlock(t *testing.T) {
	// The toolTimeouts fire when the test says: the hanging call must
	// still be waiting until then.
	timers := &heldTimers{}
	m, _ := startManager(t, sandboxNone(), map[string]mcp.ServerConfig{
		"fake":  fake(func(c *mcp.ServerConfig) { c.ToolTimeout = 2 }),
		"other": fake(),
	}, mcp.WithToolTimer(timers.after))
	hung := make(chan error, 1)
	hang := served(t, m, "mcp_fake_hang")
	go func() {
		_, err := hang(``)
		hung <- err
	}()
	for i := range 5 {
		mustCall(t, m, "mcp_fake_echo", `{"message":"still here"}`, "echo: still here")
		mustCall(t, m, "mcp_other_echo", `{"message":"me too"}`, "echo: me too")
		// The first calls are answered while the hanging one is still
		// waiting for its time-out, so they were not queued behind it.
		if i == 0 {
			select {
			case err := <-hung:
				t.Errorf("calls next to a hanging one answered only after it ended (%v)", err)
				hung <- err
			default:
			}
		}
	}
	_, err := call(t, m, "mcp_fake_bad", ``)
	if err == nil || tools.ErrorKind(err) != nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_FAILED {
		t.Errorf("malformed result: %v", err)
	} else {
		t.Logf("malformed result reported as: %v", err)
	}
	mustCall(t, m, "mcp_fake_echo", `{"message":"after bad"}`, "echo: after bad")
	// The call ends at toolTimeout, not before: none has fired yet.
	select {
	case err := <-hung:
		t.Fatalf("the hanging call ended before its toolTimeout: %v", err)
	default:
	}
	if got := timers.fire(); !slices.Contains(got, 2*time.Second) {
		t.Errorf("toolTimeouts %v, want the fake server's 2s", got)
	}
	// The error below is the toolTimeout's own; the receive's timeout is
	// the hang guard.
	err = bustest.Receive(t, hung, 30*time.Second)
	if !errors.Is(err, mcp.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) ||
		tools.ErrorKind(err) != nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_TIMEOUT ||
		!strings.Contains(err.Error(), "mcp_fake_hang did not finish within 2s") {
		t.Fatalf("hanging call: %v", err)
	}
}

// heldTimers are toolTimeout timers that fire when the test calls fire,
// or at once when asked for after it.
type heldTimers struct {
	mu     sync.Mutex
	fired  bool
	asked  []time.Duration
	timers []chan time.Time
}

func (h *heldTimers) after(d time.Duration) <-chan time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := make(chan time.Time, 1)
	h.asked = append(h.asked, d)
	if h.fired {
		c <- time.Time{}
	} else {
		h.timers = append(h.timers, c)
	}
	return c
}

// count is how many timers were asked for.
func (h *heldTimers) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.asked)
}

// release fires the timers asked for so far, and holds later ones; it
// returns the durations asked for so far.
func (h *heldTimers) release() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.timers {
		c <- time.Time{}
	}
	h.timers = nil
	return slices.Clone(h.asked)
}

// fire fires every timer, and those asked for later at once; it returns
// the durations asked for so far.
func (h *heldTimers) fire() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fired = true
	for _, c := range h.timers {
		c <- time.Time{}
	}
	h.timers = nil
	return slices.Clone(h.asked)
}

// TestDeadServerIsRestarted: a server that dies, or breaks its stdout, is
// restarted and its tools work again; a read-only call caught by the death
// waits for the restart.
func TestDeadServerIsRestarted(t *testing.T) {
	m, rec := startManager(t, sandboxNone(), map[string]mcp.ServerConfig{"fake": fake()})
	pid := m.Status()[0].PID

	_, err := call(t, m, "mcp_fake_die", ``)
	if !errors.Is(err, mcp.ErrConnectionLost) {
		t.Fatalf("call that killed the server: %v", err)
	}
	// Read-only: waits for the restart, or is run again after it.
	mustCall(t, m, "mcp_fake_env", ``, "pid=")
	mustCall(t, m, "mcp_fake_echo", `{"message":"back"}`, "echo: back")
	st := m.Status()[0]
	if st.Restarts != 1 || st.PID == pid || st.State != mcp.StateReady {
		t.Errorf("after a restart: %+v (first pid %d)", st, pid)
	}

	_, err = call(t, m, "mcp_fake_garbage", ``)
	if err == nil {
		t.Fatal("garbage on stdout: no error")
	}
	t.Logf("garbage on stdout reported as: %v", err)
	rec.await(t, "fake", func(names []string) bool { return m.Status()[0].Restarts == 2 && len(names) > 0 })
	mustCall(t, m, "mcp_fake_echo", `{"message":"back again"}`, "echo: back again")
}

func TestEnabledTools(t *testing.T) {
	cases := []struct {
		name    string
		enabled []string
		want    []string
	}{
		{"raw and wrapped names", []string{"echo", "mcp_x_fail", "mcp_x_prompt_greet"}, []string{"mcp_x_echo", "mcp_x_fail", "mcp_x_prompt_greet"}},
		{"star", []string{"*"}, nil}, // everything
		{"none", []string{}, []string{}},
		{"unknown only", []string{"nope"}, []string{}},
	}
	servers := map[string]mcp.ServerConfig{}
	for i, c := range cases {
		servers[[]string{"x", "y", "z", "w"}[i]] = fake(func(s *mcp.ServerConfig) { s.EnabledTools = c.enabled })
	}
	m, _ := startManager(t, sandboxNone(), servers)
	all := m.Names()
	for i, c := range cases {
		server := []string{"x", "y", "z", "w"}[i]
		var got []string
		for _, n := range all {
			if strings.HasPrefix(n, "mcp_"+server+"_") {
				got = append(got, strings.Replace(n, "mcp_"+server+"_", "mcp_x_", 1))
			}
		}
		if c.want == nil {
			if len(got) != 12 {
				t.Errorf("%s: %d tools, want all 12: %v", c.name, len(got), got)
			}
			continue
		}
		if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestUnavailableServerRetried: a server that cannot start is skipped
// with its reason and retried; its tools appear once it starts.
func TestUnavailableServerRetried(t *testing.T) {
	marker := filepath.Join(baseDir(t), "ready")
	m, rec := startManager(t, sandboxNone(), map[string]mcp.ServerConfig{
		"late": fake(func(c *mcp.ServerConfig) { c.Env["FAKE_MCP_REQUIRE"] = marker }),
		"ok":   fake(),
	})
	st := m.Status()
	if st[0].State != mcp.StateDown || !strings.Contains(st[0].LastError, "required file missing") {
		t.Fatalf("late server: %+v", st[0])
	}
	if st[1].State != mcp.StateReady {
		t.Fatalf("ok server: %+v", st[1])
	}
	if n := rec.names("late"); len(n) != 0 {
		t.Fatalf("tools of a server that is down: %v", n)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rec.await(t, "late", func(names []string) bool { return slices.Contains(names, "mcp_late_echo") })
	mustCall(t, m, "mcp_late_echo", `{"message":"finally"}`, "echo: finally")
}

// TestRunEndWithdrawsAndStops: once Run's context ends, every tool is
// withdrawn (an empty listing published, none served), the servers are
// stopped when Run returns, and the manager does not run again.
func TestRunEndWithdrawsAndStops(t *testing.T) {
	m, err := mcp.New(mcp.Options{Servers: map[string]mcp.ServerConfig{"fake": fake()}, Sandbox: sandboxNone(),
		DataDir: filepath.Join(baseDir(t), "ws-mcp")}, mcp.WithLogger(testLog(t)), mcp.WithStartWait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	stop := runManager(t, m)
	defer stop()
	rec := newRecorder()
	m.Serve(t.Context(), rec)
	rec.await(t, "fake", func(names []string) bool { return len(names) > 0 })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := rec.names("fake"); len(got) != 0 {
		t.Errorf("still published after Run returned: %v", got)
	}
	if got := m.Names(); len(got) != 0 {
		t.Errorf("still served after Run returned: %v", got)
	}
	if st := m.Status()[0]; st.State != mcp.StateStopped {
		t.Errorf("server %s after Run returned, want %s", st.State, mcp.StateStopped)
	}
	if err := m.Run(t.Context()); !errors.Is(err, mcp.ErrRunning) {
		t.Errorf("second Run: %v, want ErrRunning", err)
	}
}
