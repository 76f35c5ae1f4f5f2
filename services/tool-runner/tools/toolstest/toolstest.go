// Package toolstest runs tools in tests without a runner: it opens a
// workspace in a temp dir and calls a tool with raw JSON arguments, parsed
// and validated as the runner would.
package toolstest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/toolschema"

	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox/sandboxtest"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// Workspace opens a workspace in a fresh temp dir that a sandbox user can
// reach, owned by the sandbox's host user when the test runs as root.
func Workspace(t testing.TB) *sandbox.Workspace {
	t.Helper()
	base := sandboxtest.BaseDir(t)
	var opts []sandbox.WorkspaceOption
	if os.Geteuid() == 0 {
		c := sandbox.DefaultConfig()
		opts = append(opts, sandbox.WithOwner(c.HostUID, c.HostGID))
	}
	ws, err := sandbox.OpenWorkspace(filepath.Join(base, "ws"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// Run parses args against tool's schema and runs it in ws.
func Run(t testing.TB, tool tools.Tool, ws *sandbox.Workspace, args string, mods ...func(*tools.Call)) (tools.Result, error) {
	t.Helper()
	return runner(t, tool, ws, mods...)(args)
}

// runner compiles tool's schema, failing the test if it cannot, and
// returns a function that parses args against it and runs the tool in
// ws. The function does not call t.Fatal, so any goroutine may call it.
func runner(t testing.TB, tool tools.Tool, ws *sandbox.Workspace, mods ...func(*tools.Call)) func(args string) (tools.Result, error) {
	t.Helper()
	schema, err := toolschema.Compile(tool.Definition().Parameters)
	if err != nil {
		t.Fatalf("%s schema: %v", tool.Definition().Name, err)
	}
	return func(args string) (tools.Result, error) {
		parsed, err := schema.Parse(args)
		if err != nil {
			return tools.Result{}, err
		}
		c := &tools.Call{ID: "call-1", SessionKey: "test:1", Args: parsed, Workspace: ws}
		for _, m := range mods {
			m(c)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		return tool.Run(ctx, c)
	}
}

// RunWithin is Run, failing the test if the tool has not returned within
// d: for input that once kept a tool searching for ever, where nothing
// would have stopped it.
func RunWithin(t testing.TB, d time.Duration, tool tools.Tool, ws *sandbox.Workspace, args string, mods ...func(*tools.Call)) (tools.Result, error) {
	t.Helper()
	type ran struct {
		res tools.Result
		err error
	}
	done := make(chan ran, 1)
	run := runner(t, tool, ws, mods...)
	go func() {
		res, err := run(args)
		done <- ran{res, err}
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.res, r.err
	case <-timer.C:
		t.Fatalf("%s still running after %v", tool.Definition().Name, d)
		return tools.Result{}, nil
	}
}

// WriteFile writes a file into the workspace directory directly.
func WriteFile(t testing.TB, ws *sandbox.Workspace, rel, content string) {
	t.Helper()
	p := filepath.Join(ws.Dir(), rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ReadFile reads a file of the workspace directory directly.
func ReadFile(t testing.TB, ws *sandbox.Workspace, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(ws.Dir(), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
