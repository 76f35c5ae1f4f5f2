package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/toolclient"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"

	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner/runnertest"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox/sandboxtest"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

const (
	kindInvalid     = nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_INVALID_ARGUMENTS
	kindUnknown     = nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_UNKNOWN_TOOL
	kindDenied      = nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_DENIED
	kindTimeout     = nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_TIMEOUT
	kindInterrupted = nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_INTERRUPTED
	kindFailed      = nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_FAILED
)

// expectOK fails unless res is a success containing every want.
func expectOK(t testing.TB, res *nanofleetv1.ToolResult, want ...string) {
	t.Helper()
	if res.GetIsError() {
		t.Fatalf("error result (%s): %s", res.GetErrorKind(), res.GetContent())
	}
	for _, w := range want {
		if !strings.Contains(res.GetContent(), w) {
			t.Errorf("result lacks %q:\n%s", w, res.GetContent())
		}
	}
}

// expectErr fails unless res is an error of kind containing every want.
func expectErr(t testing.TB, res *nanofleetv1.ToolResult, kind nanofleetv1.ToolErrorKind, want ...string) {
	t.Helper()
	if !res.GetIsError() || res.GetErrorKind() != kind {
		t.Fatalf("result is_error=%v kind=%s, want %s:\n%s", res.GetIsError(), res.GetErrorKind(), kind, res.GetContent())
	}
	for _, w := range want {
		if !strings.Contains(res.GetContent(), w) {
			t.Errorf("error lacks %q:\n%s", w, res.GetContent())
		}
	}
}

func TestCatalog(t *testing.T) {
	f := start(t, nil)
	defs, err := f.client.Catalog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	flags := map[string]string{}
	for _, d := range defs {
		names = append(names, d.GetName())
		flags[d.GetName()] = fmt.Sprintf("ro=%v ex=%v", d.GetReadOnly(), d.GetExclusive())
		if !strings.HasPrefix(d.GetParametersJson(), "{") || d.GetDescription() == "" {
			t.Errorf("%s: incomplete definition %v", d.GetName(), d)
		}
	}
	want := "apply_patch edit_file exec glob grep list_dir read_file read_tool_output web_fetch web_search write_file"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("catalog = %s\nwant      %s", got, want)
	}
	for name, want := range map[string]string{"read_file": "ro=true ex=false", "exec": "ro=false ex=true", "write_file": "ro=false ex=true", "web_fetch": "ro=true ex=false"} {
		if flags[name] != want {
			t.Errorf("%s: %s, want %s", name, flags[name], want)
		}
	}
}

func TestFileToolsRoundTrip(t *testing.T) {
	f := start(t, nil)
	expectOK(t, f.call("write_file", map[string]any{"path": "src/main.go", "content": "package main\n\nfunc main() {}\n"}), "Wrote 29 bytes")
	expectOK(t, f.call("read_file", map[string]any{"path": "src/main.go"}), "1| package main", "3| func main() {}")
	expectOK(t, f.call("edit_file", map[string]any{"path": "src/main.go", "old_text": "func main() {}", "new_text": "func main() { println(1) }"}), "replaced 1")
	expectOK(t, f.call("grep", map[string]any{"pattern": "println"}), "src/main.go:3: func main() { println(1) }")
	expectOK(t, f.call("list_dir", `{"recursive":"true"}`), "src/\nsrc/main.go")
	expectOK(t, f.call("glob", map[string]any{"pattern": "**/*.go"}), "src/main.go")
	expectOK(t, f.call("apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Add File: README.md\n+# Hi\n*** End Patch"}), "- add README.md")
	if data, err := os.ReadFile(filepath.Join(f.ws(), "README.md")); err != nil || string(data) != "# Hi\n" {
		t.Errorf("README.md: %q %v", data, err)
	}
}

func TestArgumentErrorsNameTheField(t *testing.T) {
	f := start(t, nil)
	expectErr(t, f.call("read_file", `{"offset":"ten"}`), kindInvalid,
		"invalid arguments for read_file", `missing required argument "path"`, `argument "offset": must be integer, got string`)
	expectErr(t, f.call("exec", `{"command":"ls","timeout":601}`), kindInvalid, `argument "timeout": must be <= 30`)
	expectErr(t, f.call("read_file", `not json`), kindInvalid, "not valid JSON")
	expectErr(t, f.call("grep", `{"pattern":"x","mode":"count"}`), kindInvalid, `unknown argument "mode"; allowed:`, "output_mode")
}

func TestUnknownToolAndNoRunner(t *testing.T) {
	f := start(t, nil)
	expectErr(t, f.call("rm_rf", `{}`), kindUnknown, `unknown tool "rm_rf"`, "read_file, read_tool_output")
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
	expectErr(t, f.call("read_file", `{"path":"x"}`), kindFailed, "no tool runner is available to run read_file")
	if _, err := f.client.Catalog(t.Context()); err == nil {
		t.Error("catalog answered with no runner")
	}
}

func TestOversizeResultIsStoredAndReadBack(t *testing.T) {
	f := start(t, nil)
	var b strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&b, "row %05d %s\n", i, strings.Repeat("z", 20))
	}
	expectOK(t, f.call("write_file", map[string]any{"path": "big.txt", "content": b.String()}))
	res := f.call("read_file", map[string]any{"path": "big.txt"})
	expectOK(t, res, "1| row 00000", "[Output truncated:", "read_tool_output")
	ref := res.GetFullObject()
	if ref == "" || len(res.GetContent()) > f.cfg.Runner.PreviewChars+600 {
		t.Fatalf("full_object %q, content of %d chars", ref, len(res.GetContent()))
	}
	if strings.Contains(res.GetContent(), "row 01499") {
		t.Error("preview holds the end of the output")
	}
	page := f.call("read_tool_output", map[string]any{"ref": ref, "offset": 50000, "limit": 15000})
	expectOK(t, page, "1500| row 01499", "end of output]")
	page = f.call("read_tool_output", map[string]any{"ref": ref, "offset": 0, "limit": 100})
	expectOK(t, page, "1| row 00000", "call again with offset=100")

	// Another session cannot read it, nor can anyone read other objects.
	expectErr(t, f.call("read_tool_output", map[string]any{"ref": ref}, withSession("other:2")), kindDenied, "not an output of this session")
	expectErr(t, f.call("read_tool_output", map[string]any{"ref": "tool-media/x/y"}), kindDenied)
	expectErr(t, f.call("read_tool_output", map[string]any{"ref": ref + "-nope"}), kindFailed, "was not found")
}

func TestHeartbeatsKeepLongCallsAlive(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	f := start(t, nil)
	// The call lasts three liveness timeouts; heartbeats keep it alive.
	expectOK(t, f.call("exec", map[string]any{"command": "sleep 3; echo finished"}), "finished", "Exit code: 0")
}

func TestCallsRunConcurrently(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	f := start(t, nil)
	expectOK(t, f.call("exec", map[string]any{"command": "true"})) // probe done
	// Each command marks that it started, then waits (bounded) until all
	// three have: it sees three marks only if the calls overlap.
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			cmd := fmt.Sprintf(`touch started.%d; for n in $(seq 200); do [ $(ls started.* | wc -l) -ge 3 ] && break; sleep 0.05; done; echo "$(ls started.* | wc -l) running"`, i)
			// Not call and expectOK: they call t.Fatal, for the test's
			// goroutine only.
			res, err := f.tryCall("exec", map[string]any{"command": cmd})
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			if res.GetIsError() {
				t.Errorf("call %d: error result (%s): %s", i, res.GetErrorKind(), res.GetContent())
				return
			}
			if !strings.Contains(res.GetContent(), "3 running") {
				t.Errorf("call %d saw %q: calls ran one after another", i, res.GetContent())
			}
		})
	}
	wg.Wait()
}

func TestRequestTimeout(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	f := start(t, nil)
	res := f.call("exec", map[string]any{"command": "echo started; sleep 20"}, func(r *nanofleetv1.ToolRequest) { r.TimeoutMs = 1000 })
	expectErr(t, res, kindTimeout, "timed out", "started")
}

func TestWorkspaces(t *testing.T) {
	t.Run("per agent", func(t *testing.T) {
		f := start(t, nil)
		expectOK(t, f.call("list_dir", `{}`))
		expectOK(t, f.call("write_file", map[string]any{"path": "note.md", "content": "agent a"}, withAgent("a"), withSession("s:1")))
		// Same agent, another session: same workspace.
		expectOK(t, f.call("read_file", map[string]any{"path": "note.md"}, withAgent("a"), withSession("s:2")), "agent a")
		// Another agent: another workspace.
		expectErr(t, f.call("read_file", map[string]any{"path": "note.md"}, withAgent("b")), kindFailed, "no such file")
		// An agent id cannot name a path.
		expectOK(t, f.call("write_file", map[string]any{"path": "x", "content": "y"}, withAgent("../../outside")))
		if _, err := os.Stat(filepath.Join(f.cfg.Workspace.Root+"-agents", "=2E=2E=2F=2E=2E=2Foutside", "x")); err != nil {
			t.Errorf("agent workspace not where expected: %v", err)
		}
		// The default agent's workspace is the root, and does not
		// contain the other agents'.
		expectOK(t, f.call("write_file", map[string]any{"path": "mine.txt", "content": "d"}, withAgent("default")))
		if _, err := os.Stat(filepath.Join(f.cfg.Workspace.Root, "mine.txt")); err != nil {
			t.Errorf("default agent's workspace: %v", err)
		}
		expectOK(t, f.call("list_dir", `{}`), "mine.txt")
		expectErr(t, f.call("read_file", map[string]any{"path": "../root-agents/a/note.md"}), kindDenied)
	})
	t.Run("per session", func(t *testing.T) {
		f := start(t, func(c *runner.Config) { c.Workspace.PerSession = true })
		expectOK(t, f.call("write_file", map[string]any{"path": "note.md", "content": "session 1"}, withSession("telegram:1")))
		expectErr(t, f.call("read_file", map[string]any{"path": "note.md"}, withSession("telegram:2")), kindFailed, "no such file")
		expectOK(t, f.call("read_file", map[string]any{"path": "note.md"}, withSession("telegram:1")), "session 1")
		if _, err := os.Stat(filepath.Join(f.cfg.Workspace.Root+"-sessions", "telegram=3A1", "note.md")); err != nil {
			t.Errorf("session workspace not where expected: %v", err)
		}
	})
}

func TestExecRefusedWhenSandboxCannotStart(t *testing.T) {
	f := start(t, func(c *runner.Config) { c.Exec.BwrapPath = "/nonexistent/bwrap" })
	expectErr(t, f.call("exec", map[string]any{"command": "echo hi"}), kindDenied, "sandbox unavailable", "bubblewrap not found", `tools.exec.sandbox to "none"`)
	// The other tools still work.
	expectOK(t, f.call("write_file", map[string]any{"path": "a", "content": "b"}))
}

func TestStopWaitsForRunningCalls(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	f := start(t, nil)
	type called struct {
		res *nanofleetv1.ToolResult
		err error
	}
	done := make(chan called, 1)
	go func() {
		res, err := f.tryCall("exec", map[string]any{"command": "touch started; sleep 1; echo ok"})
		done <- called{res, err}
	}()
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(f.ws(), "started")); return err == nil })
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
	c := bustest.Receive(t, done, 30*time.Second)
	if c.err != nil {
		t.Fatal(c.err)
	}
	expectOK(t, c.res, "ok")
}

func TestConfigValidateAndLoad(t *testing.T) {
	for _, tt := range []struct {
		mutate func(*runner.Config)
		key    string
	}{
		{func(c *runner.Config) { c.Workspace.Root = "" }, "tools.workspace.root"},
		{func(c *runner.Config) { c.Workspace.Root = "/" }, "tools.workspace.root"},
		{func(c *runner.Config) { c.Runner.HeartbeatMs = 0 }, "tools.runner.heartbeatMs"},
		{func(c *runner.Config) { c.Runner.CallTimeout = 5 }, "tools.runner.callTimeout"},
		{func(c *runner.Config) { c.Runner.PreviewChars = 20000 }, "tools.runner.previewChars"},
		{func(c *runner.Config) { c.Exec.Timeout = 0 }, "tools.exec.timeout"},
		{func(c *runner.Config) { c.Web.Search.Provider = "bing" }, "tools.web.search.provider"},
	} {
		c := runner.DefaultConfig()
		tt.mutate(&c)
		var ce *config.Error
		if err := c.Validate(); !errors.Is(err, config.ErrInvalid) || !errors.As(err, &ce) || ce.Key != tt.key {
			t.Errorf("Validate = %v, want %s", err, tt.key)
		}
	}
	// The tools section is read by the fleet's one loader.
	load := func(data string, getenv func(string) string) (runner.Config, error) {
		file, cfg := config.Defaults(), runner.DefaultConfig()
		if err := config.Parse(file, []byte(data), getenv); err != nil {
			return cfg, err
		}
		return cfg, file.Section("tools", &cfg)
	}
	env := map[string]string{"TEST_BRAVE_KEY": `k"ey`}
	cfg, err := load(`{"agents":{"defaults":{"model":"x"}},"tools":{
		"workspace":{"root":"/srv/ws","perSession":true},
		"exec":{"timeout":30,"sandbox":"none","limits":{"processes":100}},
		"web":{"search":{"provider":"brave","apiKey":"${TEST_BRAVE_KEY}"},"fetch":{"allowCIDRs":["10.1.0.0/16"]}}}}`,
		func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workspace.Root != "/srv/ws" || !cfg.Workspace.PerSession || cfg.Exec.Timeout != 30 || cfg.Exec.MaxTimeout != 600 ||
		cfg.Exec.Sandbox != "none" || cfg.Exec.Limits.Processes != 100 || cfg.Exec.Limits.FileSizeMB != 1024 ||
		cfg.Web.Search.APIKey != `k"ey` || cfg.Web.Fetch.AllowCIDRs[0] != "10.1.0.0/16" || cfg.Web.Fetch.MaxChars != 50000 {
		t.Errorf("loaded %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("loaded config invalid: %v", err)
	}
	if _, err := load(`{"tools":{"web":{"search":{"apiKey":"${NOT_SET_ANYWHERE_X}"}}}}`, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "NOT_SET_ANYWHERE_X") {
		t.Errorf("unset placeholder: %v", err)
	}
}

func TestClientOptions(t *testing.T) {
	f := start(t, nil)
	for _, opt := range []toolclient.Option{toolclient.WithLivenessTimeout(0), toolclient.WithCallTimeout(-1), toolclient.WithMaxRetries(99)} {
		if _, err := toolclient.New(f.b, opt); err == nil {
			t.Error("invalid option accepted")
		}
	}
}

// waitFor polls cond for up to 20 s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	bustest.Eventually(t, 20*time.Second, func() error {
		if !cond() {
			return errors.New("condition not met")
		}
		return nil
	})
}

// rawTool answers with text that is not UTF-8, as a page in another
// encoding or a program's raw output can be.
type rawTool struct{}

func (rawTool) Definition() toolschema.Tool {
	return toolschema.Tool{Name: "raw_bytes", Description: "answers with bytes that are not UTF-8", Parameters: json.RawMessage(`{"type":"object"}`), ReadOnly: true}
}

func (rawTool) Run(context.Context, *tools.Call) (tools.Result, error) {
	return tools.Result{Text: "caf\xe9 \xff end"}, nil
}

// TestResultNotUTF8IsAnswered: proto refuses a string that is not UTF-8;
// the result must still reach the caller (with U+FFFD in place of the bad
// bytes), not leave the call to wait out its timeout.
func TestResultNotUTF8IsAnswered(t *testing.T) {
	f := start(t, nil, runner.WithTools(rawTool{}))
	res := f.call("raw_bytes", map[string]any{})
	if res.GetIsError() || res.GetContent() != "caf\uFFFD \uFFFD end" {
		t.Errorf("result %q (error %v), want the text with U+FFFD for the bad bytes", res.GetContent(), res.GetIsError())
	}
}

// TestRunOutlivesItsConnectionDroppingAtStart: the runner's connection
// drops (its node restarts) while Run waits for the server to hold its
// endpoints' subscriptions. nats.go fails that wait with "connection
// closed" though it reconnects and subscribes again, and Run failed: the
// tool-runner exited. It must serve once the connection is back.
func TestRunOutlivesItsConnectionDroppingAtStart(t *testing.T) {
	cfg, _ := testConfig(t)
	srv := bustest.StartServer(t)
	srv.Connect(t, "") // provisions the layout
	hop := bustest.NewProxy(t, srv.ClientURL())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b := hop.Connect(t, srv.ClientURL())
	r, err := runner.New(cfg, b)
	if err != nil {
		t.Fatal(err)
	}
	hop.CutAt(ctx, t, "SUB "+b.Space.ToolCatalog()+" ", func() { runnertest.Run(t, r) })
	client, err := toolclient.New(srv.Connect(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Catalog(ctx); err != nil {
		t.Fatalf("catalog after the connection came back: %v", err)
	}
}

// TestStartGivesTheRootToTheSandboxUser: a root runner gives the
// workspace root to the user exec runs as when it starts, not at the
// first tool call, so that what other parts create there first (the
// memory file sync's memory/) is that user's too.
func TestStartGivesTheRootToTheSandboxUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root runner runs exec as another user")
	}
	f := start(t, nil)
	fi, err := os.Stat(f.cfg.Workspace.Root)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != f.cfg.Exec.HostUID || int(st.Gid) != f.cfg.Exec.HostGID {
		t.Errorf("workspace root owned by %d:%d after start, want the sandbox user %d:%d", st.Uid, st.Gid, f.cfg.Exec.HostUID, f.cfg.Exec.HostGID)
	}
}

// stuckTool is a call that ignores its cancellation (a system call that
// never returns) until the test releases it.
type stuckTool struct {
	started chan struct{}
	release chan struct{}
}

func (stuckTool) Definition() toolschema.Tool {
	return toolschema.Tool{Name: "stuck", Description: "never returns", Parameters: json.RawMessage(`{"type":"object"}`), ReadOnly: true}
}

func (s stuckTool) Run(context.Context, *tools.Call) (tools.Result, error) {
	close(s.started)
	<-s.release
	return tools.Result{Text: "late"}, nil
}

// TestStopLeavesACallThatIgnoresCancellation: a stop cancels what is
// still running after its grace, and returns (saying so) even when a
// call does not end: the runner waited for it for good, and the
// tool-runner never exited.
func TestStopLeavesACallThatIgnoresCancellation(t *testing.T) {
	stuck := stuckTool{started: make(chan struct{}), release: make(chan struct{})}
	f := start(t, nil, runner.WithTools(stuck), runner.WithStopGrace(10*time.Millisecond))
	defer close(stuck.release)
	go func() { _, _ = f.tryCall("stuck", map[string]any{}) }()
	bustest.Receive(t, stuck.started, 30*time.Second)
	stopped := make(chan error, 1)
	go func() { stopped <- f.stop() }()
	if err := bustest.Receive(t, stopped, 30*time.Second); err == nil || !strings.Contains(err.Error(), "still running after their cancellation") {
		t.Errorf("stop = %v, want an error saying calls were left running", err)
	}
}
