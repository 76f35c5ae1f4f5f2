// Package mcptest runs the real MCP test servers CI installs from npm
// (.ci/npm-packages) for the tool-runner's and the fleet's tests.
package mcptest

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
)

// EverythingPackage is the MCP test server CI installs.
const EverythingPackage = "@modelcontextprotocol/server-everything@2026.8.31"

// Everything finds the server-everything binary and the sandbox to run
// it in (see [Sandbox]). It skips the test only when node or the package
// is not installed.
func Everything(t testing.TB) (string, sandbox.Mode) {
	t.Helper()
	bin, err := exec.LookPath("mcp-server-everything")
	if err != nil {
		t.Skipf("skipping: the MCP test server is not installed (%v); install it with `npm install -g %s` (CI installs the packages listed in .ci/npm-packages)", err, EverythingPackage)
	}
	return bin, Sandbox(t, bin)
}

// Sandbox picks the sandbox for the npm server bin: bubblewrap when it
// works here and node and bin live under /usr (which the sandbox binds),
// "none" otherwise. It skips the test when node is not installed.
func Sandbox(t testing.TB, bin string) sandbox.Mode {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("skipping: node is not installed (%v); the MCP test server %s needs it", err, EverythingPackage)
	}
	mode := sandbox.ModeBwrap
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "bwrap", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		t.Logf("bubblewrap cannot run here (%v: %s); running the MCP server with sandbox \"none\"", err, out)
		mode = sandbox.ModeNone
	}
	for _, p := range []string{bin, node} {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || !strings.HasPrefix(real, "/usr/") {
			t.Logf("%s (%s) is not under /usr, which the sandbox binds; running the MCP server with sandbox \"none\"", p, real)
			mode = sandbox.ModeNone
		}
	}
	return mode
}
