package shell_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/toolschema"

	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox/sandboxtest"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/shell"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/toolstest"
)

func newExec(t *testing.T, mutate func(*shell.Config)) tools.Tool {
	t.Helper()
	cfg := shell.DefaultConfig()
	cfg.Config = sandboxtest.Config()
	cfg.MaxTimeout = 30
	cfg.Timeout = 10
	if mutate != nil {
		mutate(&cfg)
	}
	ex, err := sandbox.NewExecutor(cfg.Config)
	if err != nil {
		t.Fatal(err)
	}
	tool, err := shell.New(cfg, ex)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func TestExec(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	tool := newExec(t, nil)
	ws := toolstest.Workspace(t)
	if err := os.Mkdir(filepath.Join(ws.Dir(), "sub"), 0o777); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ args, want string }{
		{`{"command":"echo hello; echo oops >&2"}`, "hello\noops\n\nExit code: 0"},
		{`{"command":"exit 3"}`, "(no output)\n\nExit code: 3"},
		{`{"command":"pwd","working_dir":"sub"}`, filepath.Join(ws.Dir(), "sub") + "\n\nExit code: 0"},
		{`{"command":"kill -XFSZ $$"}`, "Exit code: 153 (killed by SIGXFSZ: the file size limit (tools.exec.limits.fileSizeMb) was exceeded)"},
	}
	for _, tt := range tests {
		res, err := toolstest.Run(t, tool, ws, tt.args)
		if err != nil || !strings.HasSuffix(res.Text, tt.want) {
			t.Errorf("exec %s = %q, %v; want suffix %q", tt.args, res.Text, err, tt.want)
		}
	}
}

func TestExecErrors(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	tool := newExec(t, func(c *shell.Config) { c.DenyPatterns = []string{`\bshutdown\b`} })
	ws := toolstest.Workspace(t)
	tests := []struct {
		args string
		want error
		msg  string
	}{
		{`{"command":"sleep 5; echo never","timeout":1}`, sandbox.ErrTimeout, "timed out after 1s"},
		{`{"command":"true","timeout":31}`, toolschema.ErrInvalidArguments, `argument "timeout": must be <= 30`},
		{`{"command":""}`, toolschema.ErrInvalidArguments, `argument "command"`},
		{`{"command":"ls","working_dir":"../.."}`, sandbox.ErrOutsideWorkspace, "outside the workspace"},
		{`{"command":"ls","working_dir":"missing"}`, nil, "no such file"},
		{`{"command":"shutdown -h now"}`, sandbox.ErrDenied, "tools.exec.denyPatterns"},
	}
	for _, tt := range tests {
		_, err := toolstest.Run(t, tool, ws, tt.args)
		if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("exec %s: %v, want %v %q", tt.args, err, tt.want, tt.msg)
		}
	}
	if got := tools.ErrorKind(sandbox.ErrTimeout).String(); got != "TOOL_ERROR_KIND_TIMEOUT" {
		t.Errorf("kind of a timeout = %s", got)
	}
}

func TestExecRefusedWithoutSandbox(t *testing.T) {
	tool := newExec(t, func(c *shell.Config) { c.BwrapPath = "/nonexistent/bwrap" })
	_, err := toolstest.Run(t, tool, toolstest.Workspace(t), `{"command":"echo hi"}`)
	if !errors.Is(err, sandbox.ErrSandboxUnavailable) || !strings.Contains(err.Error(), `tools.exec.sandbox to "none"`) {
		t.Fatalf("err = %v", err)
	}
	if tools.ErrorKind(err).String() != "TOOL_ERROR_KIND_DENIED" {
		t.Errorf("kind = %s", tools.ErrorKind(err))
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		mutate func(*shell.Config)
		key    string
	}{
		{func(c *shell.Config) { c.Timeout = 0 }, "tools.exec.timeout"},
		{func(c *shell.Config) { c.Timeout = 700 }, "tools.exec.timeout"},
		{func(c *shell.Config) { c.MaxTimeout = 0 }, "tools.exec.maxTimeout"},
		{func(c *shell.Config) { c.DenyPatterns = []string{"("} }, "tools.exec.denyPatterns"},
		{func(c *shell.Config) { c.Sandbox = "off" }, "tools.exec.sandbox"},
	} {
		c := shell.DefaultConfig()
		tt.mutate(&c)
		var ce *config.Error
		if err := c.Validate(); !errors.As(err, &ce) || ce.Key != tt.key {
			t.Errorf("Validate = %v, want %s", err, tt.key)
		}
	}
}
