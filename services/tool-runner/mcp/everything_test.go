package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/toolclient"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"

	"github.com/nanofleet/nanofleet/services/tool-runner/mcp"
	"github.com/nanofleet/nanofleet/services/tool-runner/mcp/mcptest"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner/runnertest"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
)

// rfix is a runner with MCP servers and a client, on an embedded NATS.
type rfix struct {
	t      *testing.T
	srv    *bustest.Server
	b      *bus.Bus
	runner *runner.Runner
	client *toolclient.Client
	// timers are the MCP calls' toolTimeouts, fired when the test says.
	timers *heldTimers
}

func runnerConfig(t *testing.T, mode sandbox.Mode, servers map[string]mcp.ServerConfig) runner.Config {
	cfg := runner.DefaultConfig()
	cfg.Workspace.Root = filepath.Join(baseDir(t), "ws")
	cfg.Exec.Config = testSandbox(mode)
	cfg.Runner.HeartbeatMs = 100
	cfg.MCPServers = servers
	return cfg
}

func startRunner(t *testing.T, srv *bustest.Server, cfg runner.Config, opts ...mcp.Option) *runner.Runner {
	t.Helper()
	opts = append([]mcp.Option{mcp.WithConnectTimeout(30 * time.Second), mcp.WithStartWait(40 * time.Second)}, opts...)
	r, err := runner.New(cfg, srv.Connect(t, ""), runner.WithLogger(testLog(t)), runner.WithMCPOptions(opts...))
	if err != nil {
		t.Fatal(err)
	}
	stop := runnertest.Run(t, r)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop runner: %v", err)
		}
	})
	return r
}

func newRunnerFixture(t *testing.T, mode sandbox.Mode, servers map[string]mcp.ServerConfig) *rfix {
	t.Helper()
	f := &rfix{t: t, srv: bustest.StartServer(t), timers: &heldTimers{}}
	f.b = f.srv.Connect(t, "")
	f.runner = startRunner(t, f.srv, runnerConfig(t, mode, servers), mcp.WithToolTimer(f.timers.after))
	var err error
	if f.client, err = toolclient.New(f.b, toolclient.WithLivenessTimeout(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *rfix) call(name, args string) *nanofleetv1.ToolResult {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), 60*time.Second)
	defer cancel()
	res, err := f.client.Call(ctx, &nanofleetv1.ToolRequest{CallId: "c-" + name, Name: name, ArgumentsJson: args, SessionKey: "test:1"})
	if err != nil {
		f.t.Fatalf("%s: %v", name, err)
	}
	return res
}

func (f *rfix) want(name, args, text string) {
	f.t.Helper()
	res := f.call(name, args)
	if res.GetIsError() || !strings.Contains(res.GetContent(), text) {
		f.t.Fatalf("%s(%s) = %v; want %q", name, args, res, text)
	}
}

func (f *rfix) catalog() []string {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), 10*time.Second)
	defer cancel()
	defs, err := f.client.Catalog(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.GetName()
	}
	return names
}

// checkEverything runs the acceptance checks on server name, a running
// server-everything: its tools are listed, one is called, a resource
// read, a prompt got, and a call past toolTimeout (2 s) is a time-out
// that does not hold up a concurrent call. The toolTimeouts fire when
// the test says: a loaded machine cannot make the long call end before
// the concurrent one is answered.
func checkEverything(t *testing.T, f *rfix, name string) {
	p := "mcp_" + name + "_"
	names := f.catalog()
	for _, want := range []string{p + "echo", p + "get-sum", p + "trigger-long-running-operation",
		p + "resource_architecture_md", p + "resource_Dynamic_Text_Resource", p + "prompt_simple-prompt", p + "prompt_args-prompt", "read_file", "exec"} {
		if !slices.Contains(names, want) {
			t.Fatalf("catalog lacks %s: %v", want, names)
		}
	}
	f.want(p+"echo", `{"message":"hello from nanofleet"}`, "Echo: hello from nanofleet")
	f.want(p+"get-sum", `{"a":2,"b":"3"}`, "The sum of 2 and 3 is 5.")
	f.want(p+"resource_architecture_md", ``, "Architecture")
	f.want(p+"resource_Dynamic_Text_Resource", `{"resourceId":"7"}`, "7")
	f.want(p+"prompt_args-prompt", `{"city":"Paris"}`, "Paris")
	f.want(p+"prompt_simple-prompt", ``, "simple prompt")

	bad := f.call(p+"get-sum", `{"a":"two"}`)
	if bad.GetErrorKind() != nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_INVALID_ARGUMENTS {
		t.Errorf("bad arguments: %v", bad)
	}

	armed := f.timers.count()
	slow := make(chan *nanofleetv1.ToolResult, 1)
	go func() {
		res, err := f.client.Call(t.Context(), &nanofleetv1.ToolRequest{CallId: "slow", Name: p + "trigger-long-running-operation",
			ArgumentsJson: `{"duration":30,"steps":3}`, SessionKey: "test:1"})
		if err != nil {
			res = &nanofleetv1.ToolResult{Content: err.Error()}
		}
		slow <- res
	}()
	// The long call is under way once its toolTimeout is armed.
	bustest.Eventually(t, 30*time.Second, func() error {
		if f.timers.count() == armed {
			return errors.New("the long call has not started")
		}
		return nil
	})
	f.want(p+"echo", `{"message":"not blocked"}`, "Echo: not blocked")
	// The echo was not queued behind the long call: it is answered while
	// the long call is still running (it runs 30 s, and its time-out has
	// not fired).
	select {
	case res := <-slow:
		t.Errorf("echo answered only after the long call ended: %v", res)
		slow <- res
	default:
	}
	// The operation asked for runs 30 s and would then succeed: the
	// time-out error is its 2 s toolTimeout cutting it off.
	if asked := f.timers.release(); !slices.Contains(asked, 2*time.Second) {
		t.Errorf("toolTimeouts %v, want the server's 2s", asked)
	}
	res := bustest.Receive(t, slow, 60*time.Second)
	if res.GetErrorKind() != nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_TIMEOUT || !strings.Contains(res.GetContent(), "did not finish within 2s") {
		t.Errorf("long call: %v", res)
	}
}

// TestEverythingStdio: the real server-everything from npm over stdio,
// in the sandbox, served by a runner over NATS; enabledTools filters; the
// server killed is restarted and the next calls succeed.
func TestEverythingStdio(t *testing.T) {
	bin, mode := mcptest.Everything(t)
	f := newRunnerFixture(t, mode, map[string]mcp.ServerConfig{
		"everything": {Command: filepath.Base(bin), ToolTimeout: 2},
		"only":       {Command: filepath.Base(bin), EnabledTools: []string{"echo", "mcp_only_prompt_simple-prompt"}},
	})
	checkEverything(t, f, "everything")

	var only []string
	for _, n := range f.catalog() {
		if strings.HasPrefix(n, "mcp_only_") {
			only = append(only, n)
		}
	}
	if !slices.Equal(only, []string{"mcp_only_echo", "mcp_only_prompt_simple-prompt"}) {
		t.Errorf("enabledTools: %v", only)
	}

	// The runner's own catalog: built-ins, then MCP tools, each sorted.
	msg, err := f.b.NC.Request(f.b.Space.ToolCatalog(), nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var cat nanofleetv1.ToolCatalog
	if err := proto.Unmarshal(msg.Data, &cat); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, d := range cat.GetTools() {
		order = append(order, d.GetName())
	}
	firstMCP := slices.IndexFunc(order, func(n string) bool { return strings.HasPrefix(n, "mcp_") })
	if firstMCP < 1 || !slices.IsSorted(order[:firstMCP]) || !slices.IsSorted(order[firstMCP:]) ||
		slices.ContainsFunc(order[firstMCP:], func(n string) bool { return !strings.HasPrefix(n, "mcp_") }) {
		t.Errorf("runner catalog order: %v", order)
	}

	var pid int
	for _, s := range f.runner.MCP().Status() {
		if s.Name == "everything" {
			pid = s.PID
		}
	}
	if pid == 0 {
		t.Fatalf("no pid: %+v", f.runner.MCP().Status())
	}
	// The whole process group: bwrap, its PID namespace's init and node.
	// Killing bwrap alone leaves node to die by the parent-death signal a
	// moment later, time enough to answer the next call on the old
	// connection; a SIGKILLed process runs no more of its own code.
	killed := time.Now()
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The restart waits out the backoff (up to 1 s) and node's start-up in
	// the sandbox, which on a loaded machine outlasts the server's 2 s
	// toolTimeout: a call sent now would race it. So the test waits for
	// the restart itself; a call caught by a restart waiting for it is
	// TestDeadServerIsRestarted's, with a server that starts at once.
	everythingStatus := func() (mcp.ServerStatus, bool) {
		st := f.runner.MCP().Status()
		i := slices.IndexFunc(st, func(s mcp.ServerStatus) bool { return s.Name == "everything" })
		if i < 0 {
			return mcp.ServerStatus{}, false
		}
		return st[i], true
	}
	bustest.Eventually(t, 60*time.Second, func() error {
		if s, ok := everythingStatus(); !ok || s.Restarts != 1 || s.PID == pid || s.State != mcp.StateReady {
			return fmt.Errorf("not restarted yet: %+v (killed pid %d)", s, pid)
		}
		return nil
	})
	t.Logf("server-everything restarted %s after the kill", time.Since(killed).Round(10*time.Millisecond))
	f.want("mcp_everything_echo", `{"message":"after the kill"}`, "Echo: after the kill")
	f.want("mcp_everything_get-sum", `{"a":1,"b":1}`, "is 2.")
	if s, _ := everythingStatus(); s.Restarts != 1 || s.PID == pid || s.State != mcp.StateReady {
		t.Errorf("after the kill and two calls: %+v", s)
	}
}

// TestEverythingStreamableHTTP: the real server-everything over streamable
// HTTP (its own process), reached through the network guard with loopback
// allowed for it.
func TestEverythingStreamableHTTP(t *testing.T) {
	bin, _ := mcptest.Everything(t)
	url, _ := mcptest.HTTP(t, bin)
	f := newRunnerFixture(t, sandbox.ModeNone, map[string]mcp.ServerConfig{
		"everything": {URL: url, ToolTimeout: 2, AllowCIDRs: []string{"127.0.0.1/32"}},
	})
	if st := f.runner.MCP().Status(); st[0].Transport != mcp.TransportStreamableHTTP || st[0].State != mcp.StateReady {
		t.Fatalf("status %+v", st)
	}
	checkEverything(t, f, "everything")
}

// TestRemoteServerRestarted: a remote server that goes away and comes
// back on the same address is reconnected and its tools served again.
func TestRemoteServerRestarted(t *testing.T) {
	bin, _ := mcptest.Everything(t)
	url, proc := mcptest.HTTP(t, bin)
	m, rec := startManager(t, sandboxNone(), map[string]mcp.ServerConfig{
		"remote": {URL: url, AllowCIDRs: []string{"127.0.0.1/32"}},
	})
	mustCall(t, m, "mcp_remote_echo", `{"message":"one"}`, "Echo: one")
	_ = syscall.Kill(-proc.Pid, syscall.SIGKILL)
	rec.await(t, "remote", func(names []string) bool { return len(names) == 0 }) // withdrawn
	var port int
	fmt.Sscanf(url, "http://127.0.0.1:%d/mcp", &port)
	mcptest.StartHTTP(t, bin, port)
	rec.await(t, "remote", func(names []string) bool { return slices.Contains(names, "mcp_remote_echo") })
	mustCall(t, m, "mcp_remote_echo", `{"message":"two"}`, "Echo: two")
}

// TestTwoRunnersOneHasTheServer: the worker's catalog (toolclient) is the
// union of the runners'; MCP calls reach the runner that has the server,
// built-in calls either.
func TestTwoRunnersOneHasTheServer(t *testing.T) {
	bin, mode := mcptest.Everything(t)
	f := newRunnerFixture(t, mode, map[string]mcp.ServerConfig{"everything": {Command: filepath.Base(bin)}})
	plain := startRunner(t, f.srv, runnerConfig(t, mode, nil))

	// The plain runner alone does not serve MCP tools.
	sub, err := f.b.NC.SubscribeSync(nats.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.b.NC.PublishRequest(f.b.Space.ToolCatalog(), sub.Subject, nil); err != nil {
		t.Fatal(err)
	}
	answers := map[string]bool{} // runner has MCP tools
	for range 2 {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("catalog answers: %v", err)
		}
		var cat nanofleetv1.ToolCatalog
		if err := proto.Unmarshal(m.Data, &cat); err != nil {
			t.Fatal(err)
		}
		has := slices.ContainsFunc(cat.GetTools(), func(d *nanofleetv1.ToolDefinition) bool { return strings.HasPrefix(d.GetName(), "mcp_") })
		answers[fmt.Sprint(has)] = true
	}
	if !answers["true"] || !answers["false"] {
		t.Fatalf("each runner should answer the catalog, one with MCP tools: %v", answers)
	}
	if names := f.catalog(); !slices.Contains(names, "mcp_everything_echo") || !slices.Contains(names, "read_file") {
		t.Fatalf("merged catalog: %v", names)
	}
	// Were a call for an MCP tool to reach the plain runner, it would
	// answer "unknown tool".
	for i := range 8 {
		f.want("mcp_everything_echo", fmt.Sprintf(`{"message":"call %d"}`, i), fmt.Sprintf("Echo: call %d", i))
	}
	for range 4 {
		if res := f.call("list_dir", `{"path":"."}`); res.GetIsError() {
			t.Fatalf("list_dir: %v", res)
		}
	}
	if plain.MCP() != nil {
		t.Error("a runner without MCP servers has an MCP manager")
	}
}
