package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox/sandboxtest"
)

func newExecutor(t testing.TB, mutate func(*sandbox.Config)) *sandbox.Executor {
	t.Helper()
	cfg := sandboxtest.Config()
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := sandbox.NewExecutor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// workspace makes a workspace directory the sandbox user can use: test
// temp dirs are 0700 and owned by the test's user.
func workspace(t testing.TB, e *sandbox.Executor) string {
	t.Helper()
	base := sandboxtest.BaseDir(t)
	var opts []sandbox.WorkspaceOption
	if uid, gid, ok := e.Owner(); ok {
		opts = append(opts, sandbox.WithOwner(uid, gid))
	}
	ws, err := sandbox.OpenWorkspace(filepath.Join(base, "ws"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws.Dir()
}

func run(t *testing.T, e *sandbox.Executor, ws, command string, timeout time.Duration) (*sandbox.Outcome, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout+30*time.Second)
	defer cancel()
	return e.Run(ctx, sandbox.Spec{Command: command, Workspace: ws, Timeout: timeout})
}

func TestExecIdentityAndNamespaces(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	e := newExecutor(t, nil)
	ws := workspace(t, e)
	hostUserNS, _ := os.Readlink("/proc/self/ns/user")
	out, err := run(t, e, ws, `id -u; id -g; grep CapEff /proc/self/status; readlink /proc/self/ns/user; hostname; pwd; echo "HOME=$HOME"; ls /proc | grep -c '^[0-9]'; touch mine`, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.Output), "\n")
	if len(lines) < 8 {
		t.Fatalf("output: %q", out.Output)
	}
	checks := []struct{ got, want, what string }{
		{lines[0], "65534", "uid"},
		{lines[1], "65534", "gid"},
		{strings.Join(strings.Fields(lines[2]), " "), "CapEff: 0000000000000000", "effective capabilities"},
		{lines[5], ws, "working directory"},
		{lines[4], "sandbox", "hostname"},
		{lines[6], "HOME=" + ws, "HOME"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if lines[3] == hostUserNS {
		t.Errorf("same user namespace as the runner: %s", lines[3])
	}
	// On the host, the command's files belong to an unprivileged user.
	fi, err := os.Stat(filepath.Join(ws, "mine"))
	if err != nil {
		t.Fatal(err)
	}
	if uid, _, ok := e.Owner(); ok {
		if got := fi.Sys().(*syscall.Stat_t).Uid; int(got) != uid || got == 0 {
			t.Errorf("host owner of a file the command made = %d, want %d", got, uid)
		}
	}
	// A new PID namespace shows only the sandbox's own few processes.
	if n := lines[7]; n == "" || len(n) > 1 {
		t.Errorf("processes visible in /proc: %s", n)
	}
}

func TestExecLimitsHold(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	e := newExecutor(t, nil)
	out, err := run(t, e, workspace(t, e), `cat /proc/self/limits`, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Max cpu time":       "30",
		"Max file size":      fmt.Sprint(16 << 20),
		"Max processes":      "64",
		"Max open files":     "1024",
		"Max address space":  fmt.Sprint(1024 << 20),
		"Max core file size": "0",
	}
	for _, line := range strings.Split(out.Output, "\n") {
		for name, v := range want {
			if strings.HasPrefix(line, name+" ") {
				f := strings.Fields(strings.TrimPrefix(line, name))
				if len(f) < 2 || f[0] != v || f[1] != v {
					t.Errorf("%s: %q, want soft and hard %s", name, line, v)
				}
				delete(want, name)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("limits not found: %v in\n%s", want, out.Output)
	}
}

func TestExecEnvironmentScrubbed(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	t.Setenv("OPENAI_API_KEY", "sk-test-must-not-leak-1234")
	t.Setenv("TZ", "Europe/Paris")
	for _, mode := range []sandbox.Mode{sandbox.ModeBwrap, sandbox.ModeNone} {
		t.Run(string(mode), func(t *testing.T) {
			e := newExecutor(t, func(c *sandbox.Config) { c.Sandbox = mode })
			out, err := run(t, e, workspace(t, e), `env; cat /proc/*/environ 2>/dev/null | tr '\0' '\n'`, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out.Output, "sk-test-must-not-leak") || strings.Contains(out.Output, "OPENAI_API_KEY") {
				t.Errorf("secret leaked into the sandbox:\n%s", out.Output)
			}
			if !strings.Contains(out.Output, "TZ=Europe/Paris") {
				t.Errorf("allow-listed TZ missing:\n%s", out.Output)
			}
		})
	}
}

// TestExecEnvNotOnCommandLine: a variable passed through to commands
// (an API key the operator lists in tools.exec.env) reaches the command
// but not bubblewrap's command line, which every host user can read in
// /proc while the command runs.
func TestExecEnvNotOnCommandLine(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	const secret = "pass-through-secret-51a0"
	t.Setenv("NANOFLEET_PASS_TOKEN", secret)
	e := newExecutor(t, func(c *sandbox.Config) { c.Env = append(c.Env, "NANOFLEET_PASS_TOKEN") })
	ws := workspace(t, e)
	type result struct {
		out *sandbox.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		out, err := e.Run(ctx, sandbox.Spec{Workspace: ws, Timeout: 30 * time.Second,
			Command: `printenv NANOFLEET_PASS_TOKEN > seen; while [ ! -e go ]; do sleep 0.05; done; echo done`})
		done <- result{out, err}
	}()
	bustest.Eventually(t, 30*time.Second, func() error {
		if seen, err := os.ReadFile(filepath.Join(ws, "seen")); err != nil || string(seen) != secret+"\n" {
			return fmt.Errorf("the command saw %q (%v)", seen, err)
		}
		return nil
	})
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if cmdline, err := os.ReadFile(p); err == nil && strings.Contains(string(cmdline), secret) {
			t.Errorf("%s holds the secret: %q", p, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || !strings.Contains(r.out.Output, "done") {
			t.Fatalf("command: %v, %v", r.out, r.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the command did not end")
	}
}

func TestExecReadOnlySystemAndNoWayOut(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	e := newExecutor(t, nil)
	ws := workspace(t, e)
	base := filepath.Dir(ws)
	must(t, os.WriteFile(filepath.Join(base, "secret.txt"), []byte("TOP SECRET"), 0o644))
	out, err := run(t, e, ws, `
		echo pwned > ../escape.txt; echo "rc=$?"
		echo pwned > `+base+`/escape2.txt; echo "rc=$?"
		cat `+base+`/secret.txt; echo "rc=$?"
		cat /proc/self/root`+base+`/secret.txt; echo "rc=$?"
		touch /usr/pwned; echo "rc=$?"
		echo x >> /etc/passwd; echo "rc=$?"
		ls /root /home 2>&1; cat /etc/shadow; echo "rc=$?"
		echo ok > inside.txt; echo "rc=$?"`, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.Output, "TOP SECRET") {
		t.Errorf("read a file outside the workspace:\n%s", out.Output)
	}
	rcs := strings.Count(out.Output, "rc=0")
	if rcs != 1 || !strings.HasSuffix(strings.TrimSpace(out.Output), "rc=0") {
		t.Errorf("want only the write inside the workspace to succeed:\n%s", out.Output)
	}
	for _, f := range []string{"escape.txt", "escape2.txt"} {
		if _, err := os.Stat(filepath.Join(base, f)); err == nil {
			t.Errorf("%s was written outside the workspace", f)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "inside.txt")); string(data) != "ok\n" {
		t.Errorf("inside.txt = %q", data)
	}
}

func TestExecNoNetwork(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	e := newExecutor(t, nil)
	out, err := run(t, e, workspace(t, e), fmt.Sprintf(`bash -c 'echo hi > /dev/tcp/127.0.0.1/%d' 2>&1; echo "rc=$?"`, port), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Output, "rc=1") {
		t.Errorf("connect to the host's loopback did not fail:\n%s", out.Output)
	}
	select {
	case <-accepted:
		t.Fatal("the test listener accepted a connection from the sandbox")
	default:
	}
}

func TestExecTimeoutKillsEverything(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	for _, mode := range []sandbox.Mode{sandbox.ModeBwrap, sandbox.ModeNone} {
		t.Run(string(mode), func(t *testing.T) {
			e := newExecutor(t, func(c *sandbox.Config) { c.Sandbox = mode })
			marker := fmt.Sprintf("%d.%d", 300+len(mode), time.Now().UnixNano()%100000)
			// The caller would wait 30 s for a command that sleeps 300 s
			// and ignores SIGTERM; Run reports the caller's deadline as a
			// timeout too, so a live ctx shows its own 1 s timeout ended it.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			out, err := e.Run(ctx, sandbox.Spec{Workspace: workspace(t, e), Timeout: time.Second,
				Command: `trap '' TERM HUP INT; echo started; sleep ` + marker + ` & sleep ` + marker + `; wait`})
			if !errors.Is(err, sandbox.ErrTimeout) || out == nil || !out.TimedOut {
				t.Fatalf("err = %v, outcome %+v; want a timeout", err, out)
			}
			if ctx.Err() != nil {
				t.Fatalf("the caller's deadline ended the run, not its 1 s timeout")
			}
			if !strings.Contains(out.Output, "started") {
				t.Errorf("partial output lost: %q", out.Output)
			}
			// Killed, not merely left behind: nothing it started is alive.
			waitGone(t, "sleep "+marker)
		})
	}
}

// waitGone waits until no process on the host has cmdline in its command
// line.
func waitGone(t *testing.T, cmdline string) {
	t.Helper()
	bustest.Eventually(t, 10*time.Second, func() error {
		if left := processesMatching(cmdline); len(left) != 0 {
			return fmt.Errorf("processes survived the timeout: %v", left)
		}
		return nil
	})
}

func processesMatching(s string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		data, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(data), "\x00", " "), s) {
			out = append(out, d)
		}
	}
	return out
}

func TestExecProcessLimitHolds(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	e := newExecutor(t, func(c *sandbox.Config) { c.Limits.Processes = 10 })
	// At most 30 processes are attempted: safe even if the limit failed.
	out, err := run(t, e, workspace(t, e), `n=0; for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30; do (sleep 3) & n=$i; done; echo "spawned $n"`, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.Output, "spawned 30") || !strings.Contains(out.Output, "fork") {
		t.Errorf("30 processes started under a limit of 10:\n%s", out.Output)
	}
}

func TestExecForkBombContained(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	e := newExecutor(t, nil)
	start := time.Now()
	out, err := run(t, e, workspace(t, e), `bomb() { bomb | bomb & }; bomb; sleep 5`, 2*time.Second)
	t.Logf("bomb: %v after %s, exit %d, %d bytes of output", err, time.Since(start), out.ExitCode, out.OutputBytes)
	if !errors.Is(err, sandbox.ErrTimeout) && err != nil {
		t.Fatalf("fork bomb: %v", err)
	}
	if out == nil {
		t.Fatal("no outcome")
	}
	// The runner still works afterwards.
	out, err = run(t, e, workspace(t, e), `echo alive`, 10*time.Second)
	if err != nil || strings.TrimSpace(out.Output) != "alive" {
		t.Fatalf("after the bomb: %v %q", err, out.Output)
	}
}

// TestExecFileSizeLimit: a command writing past its file size limit is
// killed by SIGXFSZ, and the note names the limit that applied: the
// configured one (16 MiB in sandboxtest), or the workspace's remaining
// quota when that is lower.
func TestExecFileSizeLimit(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	e := newExecutor(t, nil)
	for _, tc := range []struct {
		name     string
		quota    int64 // Spec.FileSizeLimit
		maxSize  int64
		wantNote string
	}{
		{"configured limit", 0, 16 << 20, "file size limit (tools.exec.limits.fileSizeMb)"},
		{"quota lower than the limit", 1 << 20, 1 << 20, "what the workspace's quota has left"},
		{"limit lower than the quota", 1 << 30, 16 << 20, "file size limit (tools.exec.limits.fileSizeMb)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := workspace(t, e)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			out, err := e.Run(ctx, sandbox.Spec{
				Command: `dd if=/dev/zero of=big bs=1M count=10240 2>&1`, Workspace: ws,
				Timeout: 20 * time.Second, FileSizeLimit: tc.quota,
			})
			if err != nil {
				t.Fatal(err)
			}
			if out.ExitCode != 128+25 || !strings.Contains(out.SignalNote(), tc.wantNote) {
				t.Errorf("exit %d (%s), want SIGXFSZ and a note naming %q; output %q", out.ExitCode, out.SignalNote(), tc.wantNote, out.Output)
			}
			fi, err := os.Stat(filepath.Join(ws, "big"))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() > tc.maxSize {
				t.Errorf("big has %d bytes, want at most %d", fi.Size(), tc.maxSize)
			}
		})
	}
}

func TestExecHugeOutputIsCapped(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	e := newExecutor(t, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := run(t, e, workspace(t, e), `head -c 100000000 /dev/zero | tr '\0' 'a'; echo; echo THE-END`, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if out.OutputBytes < 100_000_000 || !out.Truncated {
		t.Errorf("OutputBytes = %d, truncated %v", out.OutputBytes, out.Truncated)
	}
	if len(out.Output) > sandbox.DefaultMaxOutput+200 || !strings.HasSuffix(strings.TrimSpace(out.Output), "THE-END") {
		t.Errorf("output of %d bytes, tail %q", len(out.Output), out.Output[max(0, len(out.Output)-50):])
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Errorf("capturing 100 MB allocated %d MB", grew>>20)
	}
}

func TestExecDevZeroReadIsBounded(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	e := newExecutor(t, nil)
	out, err := run(t, e, workspace(t, e), `cat /dev/zero > zeros`, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode == 0 {
		t.Errorf("cat /dev/zero into a file ended well: %+v", out)
	}
}

func TestExecUnavailableIsRefused(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*sandbox.Config)
		want   string
	}{
		{"missing bwrap", func(c *sandbox.Config) { c.BwrapPath = "/nonexistent/bwrap" }, "bubblewrap not found"},
		{"bwrap that fails", func(c *sandbox.Config) { c.BwrapPath = "/bin/false" }, "probe"},
		{"missing prlimit", func(c *sandbox.Config) { c.PrlimitPath = "/nonexistent/prlimit" }, "prlimit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newExecutor(t, tt.mutate)
			out, err := run(t, e, workspace(t, e), `echo should-not-run`, 5*time.Second)
			if !errors.Is(err, sandbox.ErrSandboxUnavailable) || !errors.Is(err, sandbox.ErrDenied) || out != nil {
				t.Fatalf("Run = %+v, %v; want ErrSandboxUnavailable", out, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestExecExitCodesAndWorkingDir(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	e := newExecutor(t, nil)
	ws := workspace(t, e)
	must(t, os.Mkdir(filepath.Join(ws, "sub"), 0o755))
	ctx := t.Context()
	out, err := e.Run(ctx, sandbox.Spec{Command: `pwd; exit 7`, Workspace: ws, Dir: filepath.Join(ws, "sub"), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode != 7 || strings.TrimSpace(out.Output) != filepath.Join(ws, "sub") {
		t.Errorf("outcome %+v", out)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Run(cctx, sandbox.Spec{Command: "true", Workspace: ws, Timeout: time.Second}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		mutate func(*sandbox.Config)
		key    string
	}{
		{func(c *sandbox.Config) { c.Sandbox = "docker" }, "tools.exec.sandbox"},
		{func(c *sandbox.Config) { c.Env = []string{"BAD NAME"} }, "tools.exec.env"},
		{func(c *sandbox.Config) { c.Env = []string{"PATH"} }, "tools.exec.env"},
		{func(c *sandbox.Config) { c.Limits.Processes = 2 }, "tools.exec.limits.processes"},
		{func(c *sandbox.Config) { c.Limits.FileSizeMB = -1 }, "tools.exec.limits.fileSizeMb"},
		{func(c *sandbox.Config) { c.Limits.OpenFiles = 3 }, "tools.exec.limits.openFiles"},
		// In bytes, 2^44 MB wraps to 0 (unlimited), 2^43 MB to negative.
		{func(c *sandbox.Config) { c.Limits.AddressSpaceMB = 1 << 44 }, "tools.exec.limits.addressSpaceMb"},
		{func(c *sandbox.Config) { c.Limits.FileSizeMB = 1 << 43 }, "tools.exec.limits.fileSizeMb"},
		{func(c *sandbox.Config) { c.TmpSizeMB = 1 << 43 }, "tools.exec.tmpSizeMb"},
		{func(c *sandbox.Config) { c.TmpSizeMB = -1 }, "tools.exec.tmpSizeMb"},
	}
	for _, tt := range tests {
		c := sandbox.DefaultConfig()
		tt.mutate(&c)
		var ce *config.Error
		if err := c.Validate(); !errors.As(err, &ce) || ce.Key != tt.key {
			t.Errorf("Validate() = %v, want an error naming %s", err, tt.key)
		}
	}
	if err := sandbox.DefaultConfig().Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
	// The largest sizes that still fit in bytes are taken.
	c := sandbox.DefaultConfig()
	c.Limits.AddressSpaceMB, c.Limits.FileSizeMB, c.TmpSizeMB = 1<<43-1, 1<<43-1, 1<<43-1
	if err := c.Validate(); err != nil {
		t.Errorf("sizes of 2^43-1 MB: %v", err)
	}
}

func BenchmarkExecStartup(b *testing.B) {
	for _, mode := range []sandbox.Mode{sandbox.ModeBwrap, sandbox.ModeNone} {
		b.Run(string(mode), func(b *testing.B) {
			if mode == sandbox.ModeBwrap {
				sandboxtest.RequireBwrap(b)
			}
			e := newExecutor(b, func(c *sandbox.Config) { c.Sandbox = mode })
			ws := workspace(b, e)
			ctx := b.Context()
			if err := e.Probe(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				out, err := e.Run(ctx, sandbox.Spec{Command: "true", Workspace: ws, Timeout: 10 * time.Second})
				if err != nil || out.ExitCode != 0 {
					b.Fatalf("%v %+v", err, out)
				}
			}
		})
	}
}

// TestExecInheritsNoDescriptor is an attack: a descriptor the runner
// inherited from whatever started it (here a file outside the workspace,
// opened without close-on-exec as a shell's `exec 7>>file` leaves it)
// reached every command, which could write to the file through it.
func TestExecInheritsNoDescriptor(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "host.log")
	fd, err := unix.Open(outside, unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for _, mode := range []sandbox.Mode{sandbox.ModeNone, sandbox.ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == sandbox.ModeBwrap {
				sandboxtest.RequireBwrap(t)
			}
			e := newExecutor(t, func(c *sandbox.Config) { c.Sandbox = mode })
			out, err := run(t, e, workspace(t, e), fmt.Sprintf("ls /proc/self/fd; echo written-from-the-command >&%d; echo rc=$?", fd), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(outside); len(got) > 0 {
				t.Errorf("the command wrote to a file it was never given: %q\n%s", got, out.Output)
			}
			if !strings.Contains(out.Output, "rc=") {
				t.Errorf("the command did not run:\n%s", out.Output)
			}
		})
	}
}
