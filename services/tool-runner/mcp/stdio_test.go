package mcp_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/syncbuf"

	"github.com/nanofleet/nanofleet/services/tool-runner/mcp"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox/sandboxtest"
)

// TestStdioServerSandbox: in bubblewrap the server runs as nobody, sees
// none of the runner's environment beyond its own env, none of the host's
// files outside the system, its home and readOnlyPaths.
func TestStdioServerSandbox(t *testing.T) {
	secretDir := baseDir(t)
	secret := filepath.Join(secretDir, "secret.txt")
	if err := os.WriteFile(secret, []byte("TOP-SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NANOFLEET_TEST_SECRET", "runner-secret")
	for _, mode := range []sandbox.Mode{sandbox.ModeBwrap, sandbox.ModeNone} {
		t.Run(string(mode), func(t *testing.T) {
			sb := testSandbox(mode)
			if mode == sandbox.ModeBwrap {
				sandboxtest.RequireBwrap(t)
			}
			m, _ := startManager(t, sb, map[string]mcp.ServerConfig{"box": fake(func(c *mcp.ServerConfig) {
				c.ReadOnlyPaths = []string{filepath.Dir(fakeBinary)}
				c.Env["OWN_VAR"] = "mine"
			})})
			res, err := call(t, m, "mcp_box_env", ``)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(res.Text, "runner-secret") || !strings.Contains(res.Text, "OWN_VAR=mine") || !strings.Contains(res.Text, "HOME=") {
				t.Errorf("environment: %s", res.Text)
			}
			if os.Geteuid() == 0 && !strings.Contains(res.Text, "uid=65534") {
				t.Errorf("server runs as: %s", res.Text)
			}
			res, err = call(t, m, "mcp_box_read", `{"path":"`+secret+`"}`)
			if err != nil {
				t.Fatal(err)
			}
			if mode == sandbox.ModeBwrap && !strings.Contains(res.Text, "cannot read") {
				t.Errorf("bwrap: a host file outside the sandbox was readable: %s", res.Text)
			}
		})
	}
}

// TestStdioRefusedWithoutSandbox: when bubblewrap cannot run, stdio
// servers are refused like exec, with the reason.
func TestStdioRefusedWithoutSandbox(t *testing.T) {
	sb := testSandbox(sandbox.ModeBwrap)
	sb.BwrapPath = "/nonexistent/bwrap"
	ex, err := sandbox.NewExecutor(sb)
	if err != nil {
		t.Fatal(err)
	}
	m, err := mcp.New(mcp.Options{Servers: map[string]mcp.ServerConfig{"fake": fake()}, Sandbox: sb, Probe: ex.Probe,
		DataDir: filepath.Join(baseDir(t), "mcp")}, mcp.WithLogger(testLog(t)), mcp.WithStartWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer runManager(t, m)()
	st := m.Status()[0]
	if st.State != mcp.StateDown || !strings.Contains(st.LastError, "sandbox unavailable") || len(m.Names()) != 0 {
		t.Fatalf("status %+v, tools %v", st, m.Names())
	}
}

// TestServerUnderAClosedDirectory: a root runner's server runs as another
// user; under a directory that user cannot enter it stays down with the
// chmod to run, and comes up by itself once that is done.
func TestServerUnderAClosedDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("servers run as this user: only a root runner drops to another one")
	}
	closed := filepath.Join(baseDir(t), "home")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	m, err := mcp.New(mcp.Options{Servers: map[string]mcp.ServerConfig{"late": fake()}, Sandbox: sandboxNone(),
		DataDir: filepath.Join(closed, "ws-mcp")}, mcp.WithLogger(testLog(t)), mcp.WithStartWait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	stop := runManager(t, m)
	t.Cleanup(func() { _ = stop() })
	rec := newRecorder()
	m.Serve(t.Context(), rec)
	if st := m.Status()[0]; st.State != mcp.StateDown || !strings.Contains(st.LastError, "chmod o+x "+closed) {
		t.Fatalf("server under a closed directory: %+v; want it down naming `chmod o+x %s`", st, closed)
	}
	if err := os.Chmod(closed, 0o711); err != nil {
		t.Fatal(err)
	}
	rec.await(t, "late", func(names []string) bool { return slices.Contains(names, "mcp_late_echo") })
	mustCall(t, m, "mcp_late_echo", `{"message":"through"}`, "echo: through")
}

// TestStdioServerEnvNotOnCommandLine: a server's env (an API key in its
// config) reaches the server but not bubblewrap's command line, which
// every host user can read in /proc for as long as the server runs, nor
// the debug log that records the command.
func TestStdioServerEnvNotOnCommandLine(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	const key = "sk-mcp-secret-7c1d"
	var logs syncbuf.Buffer
	m, _ := startManager(t, testSandbox(sandbox.ModeBwrap), map[string]mcp.ServerConfig{"box": fake(func(c *mcp.ServerConfig) {
		c.ReadOnlyPaths = []string{filepath.Dir(fakeBinary)}
		c.Env["SERVICE_TOKEN"] = key
	})}, mcp.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	mustCall(t, m, "mcp_box_env", ``, "SERVICE_TOKEN="+key)
	st := m.Status()[0]
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.PID))
	if err != nil || !strings.Contains(string(cmdline), "bwrap") {
		t.Fatalf("bubblewrap's command line (pid %d): %q, %v", st.PID, cmdline, err)
	}
	if strings.Contains(string(cmdline), key) {
		t.Errorf("the key is on bubblewrap's command line: %q", strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	if strings.Contains(logs.String(), key) {
		t.Errorf("the key is in the log:\n%s", logs.String())
	}
}
