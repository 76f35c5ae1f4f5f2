package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/toolclient"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"

	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner/runnertest"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox/sandboxtest"
)

// fixture is a runner and a client on an embedded JetStream server, with
// workspaces under base/root and a directory base/outside holding a
// secret that no attack may read or change.
type fixture struct {
	t       testing.TB
	srv     *bustest.Server
	b       *bus.Bus
	client  *toolclient.Client
	runner  *runner.Runner
	stop    func() error // ends the runner's Run
	cfg     runner.Config
	base    string
	outside string
}

const secret = "TOP-SECRET-9f2c"

func testConfig(t testing.TB) (runner.Config, string) {
	base := sandboxtest.BaseDir(t)
	cfg := runner.DefaultConfig()
	cfg.Workspace.Root = filepath.Join(base, "root")
	cfg.Exec.Config = sandboxtest.Config()
	cfg.Exec.Timeout = 10
	cfg.Exec.MaxTimeout = 30
	cfg.Runner.HeartbeatMs = 50
	cfg.Runner.CallTimeout = 60
	cfg.Web.Fetch.AllowCIDRs = []string{"127.0.0.0/8"}
	return cfg, base
}

func start(t testing.TB, mutate func(*runner.Config), opts ...runner.Option) *fixture {
	t.Helper()
	cfg, base := testConfig(t)
	if mutate != nil {
		mutate(&cfg)
	}
	srv := bustest.StartServer(t)
	f := &fixture{t: t, srv: srv, cfg: cfg, base: base, outside: filepath.Join(base, "outside")}
	if err := os.MkdirAll(f.outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.outside, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	runnerBus := srv.Connect(t, "")
	f.b = srv.Connect(t, "")
	r, err := runner.New(cfg, runnerBus, opts...)
	if err != nil {
		t.Fatal(err)
	}
	f.stop = runnertest.Run(t, r)
	f.runner = r
	f.client, err = toolclient.New(f.b, toolclient.WithLivenessTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// call runs a tool for session "test:1" of the default agent.
func (f *fixture) call(name string, args any, mods ...func(*nanofleetv1.ToolRequest)) *nanofleetv1.ToolResult {
	f.t.Helper()
	res, err := f.tryCall(name, args, mods...)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// tryCall is call returning its error instead of failing the test, for a
// goroutine other than the test's (which must not call t.Fatal).
func (f *fixture) tryCall(name string, args any, mods ...func(*nanofleetv1.ToolRequest)) (*nanofleetv1.ToolResult, error) {
	f.t.Helper()
	raw, ok := args.(string)
	if !ok {
		data, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		raw = string(data)
	}
	req := &nanofleetv1.ToolRequest{CallId: "call-" + name, Name: name, ArgumentsJson: raw, SessionKey: "test:1"}
	for _, m := range mods {
		m(req)
	}
	ctx, cancel := context.WithTimeout(f.t.Context(), 90*time.Second)
	defer cancel()
	res, err := f.client.Call(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if res.GetCallId() != req.GetCallId() {
		f.t.Errorf("call id %q, want %q", res.GetCallId(), req.GetCallId())
	}
	return res, nil
}

// ws is the workspace directory of the default agent.
func (f *fixture) ws() string { return f.runner.WorkspaceDir(&nanofleetv1.ToolRequest{}) }

// snapshot records every file under dir with its content and mode.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			v += ":" + string(data)
		}
		out[p] = v
		return nil
	})
	return out
}

// untouched fails the test if anything under the outside directory
// changed since before.
func (f *fixture) untouched(before map[string]string) {
	f.t.Helper()
	after := snapshot(f.t, f.outside)
	for p, v := range before {
		if after[p] != v {
			f.t.Errorf("%s changed outside the workspace: %q -> %q", p, v, after[p])
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			f.t.Errorf("%s appeared outside the workspace", p)
		}
	}
}

func withSession(key string) func(*nanofleetv1.ToolRequest) {
	return func(r *nanofleetv1.ToolRequest) { r.SessionKey = key }
}

func withAgent(id string) func(*nanofleetv1.ToolRequest) {
	return func(r *nanofleetv1.ToolRequest) { r.AgentId = id }
}
