// Package openaiapitest runs programs against the OpenAI-compatible API
// with the official npm openai client, as the API's users do.
package openaiapitest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// SDK is the installed npm openai package.
type SDK struct{ module string }

// NodeSDK finds node and the globally installed npm openai package, or
// skips the test: CI installs them (.ci/npm-packages), a developer's
// machine may not have them.
func NodeSDK(t testing.TB) SDK {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("skipping: node is not installed")
	}
	root, err := exec.Command("npm", "root", "-g").Output()
	if err != nil {
		t.Skipf("skipping: npm root -g: %v", err)
	}
	mod := filepath.Join(strings.TrimSpace(string(root)), "openai")
	if _, err := os.Stat(mod); err != nil {
		t.Skipf("skipping: the npm openai package is not installed (%v); CI installs .ci/npm-packages", err)
	}
	return SDK{module: mod}
}

// Run runs program with node and returns what it printed, failing the
// test if it fails. The program finds the package in OPENAI_MODULE, the
// API key in API_KEY and the API's base URL (ending in /v1) in BASE_URL.
func (s SDK) Run(ctx context.Context, t testing.TB, program, key, baseURL string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", "-e", program)
	cmd.Env = append(os.Environ(), "OPENAI_MODULE="+s.module, "API_KEY="+key, "BASE_URL="+baseURL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v: %s", err, out)
	}
	return out
}
