package runner_test

// The attack suite: one test per way out of the workspace that users of
// other assistants found. Each attempt must end in a clear error (or a
// harmless result), with nothing outside the workspace read or changed.

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"

	"github.com/nanofleet/nanofleet/services/tool-runner/netguard"
	"github.com/nanofleet/nanofleet/services/tool-runner/netguard/netguardtest"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox/sandboxtest"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/web"
)

// attack starts a fixture and checks at the end that the outside
// directory is as it was.
func attack(t *testing.T, mutate func(*runner.Config), opts ...runner.Option) *fixture {
	t.Helper()
	f := start(t, mutate, opts...)
	expectOK(t, f.call("list_dir", `{}`)) // creates the workspace
	before := snapshot(t, f.outside)
	t.Cleanup(func() { f.untouched(before) })
	return f
}

func noSecret(t *testing.T, res *nanofleetv1.ToolResult) {
	t.Helper()
	if strings.Contains(res.GetContent(), secret) {
		t.Fatalf("the secret outside the workspace was read:\n%s", res.GetContent())
	}
}

func TestAttackSymlinkToOutsideFile(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	f := attack(t, nil)
	target := filepath.Join(f.outside, "secret.txt")
	// The model plants symlinks with exec (the sandbox cannot see the
	// target, but the runner, reading for read_file, could).
	expectOK(t, f.call("exec", map[string]any{"command": fmt.Sprintf("ln -s %s abs && ln -s ../../../outside/secret.txt rel && ln -s %s dir && echo planted", target, f.outside)}), "planted")
	for _, p := range []string{"abs", "rel", "dir/secret.txt"} {
		res := f.call("read_file", map[string]any{"path": p})
		noSecret(t, res)
		expectErr(t, res, kindDenied, "outside the workspace")
		expectErr(t, f.call("write_file", map[string]any{"path": p, "content": "pwned"}), kindDenied, "outside the workspace")
		expectErr(t, f.call("edit_file", map[string]any{"path": p, "old_text": secret, "new_text": "pwned"}), kindDenied)
	}
	noSecret(t, f.call("grep", map[string]any{"pattern": "SECRET"}))
	expectErr(t, f.call("list_dir", map[string]any{"path": "dir"}), kindDenied)
}

func TestAttackDotDotAndAbsolutePaths(t *testing.T) {
	f := attack(t, nil)
	secretPath := filepath.Join(f.outside, "secret.txt")
	rel, _ := filepath.Rel(f.ws(), secretPath)
	for _, p := range []string{rel, "../../../outside/secret.txt", "a/../../x", secretPath, "/etc/passwd", f.ws() + "/../../../outside/secret.txt"} {
		res := f.call("read_file", map[string]any{"path": p})
		noSecret(t, res)
		expectErr(t, res, kindDenied, "outside the workspace")
		expectErr(t, f.call("write_file", map[string]any{"path": p, "content": "pwned"}), kindDenied)
	}
	expectErr(t, f.call("apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Add File: ../../../outside/new.txt\n+x\n*** End Patch"}), kindDenied)
	expectErr(t, f.call("grep", map[string]any{"pattern": "SECRET", "path": f.outside}), kindDenied)
	expectErr(t, f.call("glob", map[string]any{"pattern": "*", "path": ".."}), kindDenied)
	expectErr(t, f.call("exec", map[string]any{"command": "ls", "working_dir": "../.."}), kindDenied)
}

func TestAttackTilde(t *testing.T) {
	f := attack(t, nil)
	for _, p := range []string{"~", "~/.bashrc", "~root/.ssh/id_rsa", "~/../../etc/passwd"} {
		expectErr(t, f.call("read_file", map[string]any{"path": p}), kindDenied, `"~" is not expanded`)
		expectErr(t, f.call("write_file", map[string]any{"path": p, "content": "x"}), kindDenied, `"~" is not expanded`)
	}
}

func TestAttackHardLink(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	f := attack(t, nil)
	secretPath := filepath.Join(f.outside, "secret.txt")
	// From inside the sandbox the file outside is not even visible.
	res := f.call("exec", map[string]any{"command": fmt.Sprintf("ln %s hl; echo rc=$?", secretPath)})
	expectOK(t, res, "rc=1")
	// A hard link planted by someone else (same file system) is refused
	// for reading and replaced, not written through, on write.
	if err := os.Link(secretPath, filepath.Join(f.ws(), "planted")); err != nil {
		t.Fatal(err)
	}
	res = f.call("read_file", map[string]any{"path": "planted"})
	noSecret(t, res)
	expectErr(t, res, kindDenied, "hard links")
	noSecret(t, f.call("grep", map[string]any{"pattern": "SECRET"}))
	expectErr(t, f.call("edit_file", map[string]any{"path": "planted", "old_text": "TOP", "new_text": "pwned"}), kindDenied, "hard links")
	expectOK(t, f.call("write_file", map[string]any{"path": "planted", "content": "mine now"}))
}

func TestAttackProcSelfRoot(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	f := attack(t, nil)
	secretPath := filepath.Join(f.outside, "secret.txt")
	for _, p := range []string{"/proc/self/root" + secretPath, "/proc/1/root/etc/shadow", "/proc/self/environ"} {
		expectErr(t, f.call("read_file", map[string]any{"path": p}), kindDenied, "outside the workspace")
	}
	res := f.call("exec", map[string]any{"command": fmt.Sprintf("cat /proc/self/root%s /proc/1/root%s 2>&1; ls /proc/1/root/ 2>&1", secretPath, secretPath)})
	noSecret(t, res)
	expectOK(t, res, "No such file or directory")
	// The symlink trick through read_file: /proc/self/root inside the
	// workspace is refused as an absolute symlink.
	expectOK(t, f.call("exec", map[string]any{"command": "ln -s /proc/self/root root && echo ok"}), "ok")
	expectErr(t, f.call("read_file", map[string]any{"path": "root" + secretPath}), kindDenied)
}

func TestAttackExecWritesOutside(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	f := attack(t, nil)
	res := f.call("exec", map[string]any{"command": fmt.Sprintf(`
		echo pwned > ../escape.txt; echo pwned > ../../escape.txt; echo pwned > %[1]s/secret.txt
		echo pwned > %[1]s/new.txt; mkdir %[1]s/dir; rm -f %[1]s/secret.txt
		echo pwned > /etc/pwned; echo pwned > /usr/pwned; touch /pwned
		echo pwned > /proc/self/root%[1]s/secret.txt
		echo done`, f.outside)})
	expectOK(t, res, "Read-only file system", "done")
	for _, p := range []string{filepath.Join(filepath.Dir(f.ws()), "escape.txt"), filepath.Join(f.cfg.Workspace.Root, "escape.txt"), "/etc/pwned", "/usr/pwned", "/pwned"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

func TestAttackOtherSessionWorkspace(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	f := attack(t, func(c *runner.Config) { c.Workspace.PerSession = true })
	alice, bob := withSession("telegram:alice"), withSession("telegram:bob")
	expectOK(t, f.call("write_file", map[string]any{"path": "diary.txt", "content": "alice's " + secret}, alice))
	aliceWS := f.runner.WorkspaceDir(&nanofleetv1.ToolRequest{SessionKey: "telegram:alice"})
	for _, p := range []string{"diary.txt", "../telegram=3Aalice/diary.txt", filepath.Join(aliceWS, "diary.txt")} {
		res := f.call("read_file", map[string]any{"path": p}, bob)
		noSecret(t, res)
		if !res.GetIsError() {
			t.Errorf("bob read %s", p)
		}
	}
	res := f.call("exec", map[string]any{"command": fmt.Sprintf("cat %s/diary.txt ../telegram=3Aalice/diary.txt 2>&1; ls .. 2>&1", aliceWS)}, bob)
	noSecret(t, res)
	expectOK(t, res, "No such file or directory", "telegram=3Abob")
	for _, line := range strings.Split(res.GetContent(), "\n") {
		if line == "telegram=3Aalice" {
			t.Errorf("bob sees alice's workspace:\n%s", res.GetContent())
		}
	}
	// Bob cannot read Alice's stored outputs either.
	expectErr(t, f.call("read_tool_output", map[string]any{"ref": "tool-output/telegram=3Aalice/x"}, bob), kindDenied)
}

func TestAttackEnvironmentDump(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	t.Setenv("OPENAI_API_KEY", "sk-fake-runner-key-0123456789")
	t.Setenv("NATS_CREDS", "/secret/creds")
	f := attack(t, nil)
	res := f.call("exec", map[string]any{"command": "env; set; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; cat /proc/1/environ"})
	for _, leak := range []string{"sk-fake-runner-key", "OPENAI_API_KEY", "/secret/creds"} {
		if strings.Contains(res.GetContent(), leak) {
			t.Fatalf("%q leaked into the sandbox:\n%s", leak, res.GetContent())
		}
	}
	expectOK(t, res, "HOME="+f.ws(), "PATH=/usr/local/sbin")
}

func TestAttackLoopbackTCPFromExec(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	f := attack(t, nil)
	port := ln.Addr().(*net.TCPAddr).Port
	res := f.call("exec", map[string]any{"command": fmt.Sprintf(`bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && echo CONNECTED' 2>&1; bash -c 'exec 3<>/dev/tcp/%s/%d && echo CONNECTED' 2>&1; echo end`, port, f.srv.NATSServer().Addr().(*net.TCPAddr).IP, f.srv.NATSServer().Addr().(*net.TCPAddr).Port)})
	if strings.Contains(res.GetContent(), "CONNECTED") {
		t.Fatalf("the sandbox reached a loopback port:\n%s", res.GetContent())
	}
	expectOK(t, res, "end")
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the test listener accepted %d connections", n)
	}
}

func TestAttackDNSRebindingFetch(t *testing.T) {
	srv := netguardtest.NewTarget(t, secret)
	port := srv.Port()
	f := attack(t, func(c *runner.Config) { c.Web.Fetch.AllowCIDRs = nil },
		runner.WithWebOptions(web.WithGuardOptions(netguard.WithResolver(netguardtest.Resolver{"totally-public.example.com": "127.0.0.1"}))))
	for _, u := range []string{
		fmt.Sprintf("http://totally-public.example.com:%d/", port),
		fmt.Sprintf("http://127.0.0.1:%d/", port),
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", port),
		fmt.Sprintf("http://0x7f000001:%d/", port),
	} {
		res := f.call("web_fetch", map[string]any{"url": u})
		noSecret(t, res)
		if !res.GetIsError() {
			t.Errorf("%s fetched: %s", u, res.GetContent())
		}
	}
	expectErr(t, f.call("web_fetch", map[string]any{"url": fmt.Sprintf("http://totally-public.example.com:%d/", port)}), kindDenied, "resolves to 127.0.0.1", "loopback")
	if srv.Hits() != 0 {
		t.Fatalf("the loopback server was reached %d times", srv.Hits())
	}
}

func TestAttackRedirectToMetadata(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := "http://169.254.169.254/latest/meta-data/iam/security-credentials/"
		if r.URL.Path == "/v6" {
			target = "http://[fd00:ec2::254]/latest/meta-data/"
		}
		http.Redirect(w, r, target, http.StatusFound)
	}))
	defer srv.Close()
	f := attack(t, nil) // loopback allowed, so the first hop works
	expectErr(t, f.call("web_fetch", map[string]any{"url": srv.URL}), kindDenied, "169.254.169.254", "cloud metadata")
	expectErr(t, f.call("web_fetch", map[string]any{"url": srv.URL + "/v6"}), kindDenied, "fd00:ec2::254", "cloud metadata")
}

func TestAttackForkBomb(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	f := attack(t, nil)
	res := f.call("exec", map[string]any{"command": "bomb() { bomb | bomb & }; bomb; sleep 10", "timeout": 2})
	expectErr(t, res, kindTimeout, "timed out", "killed")
	expectOK(t, f.call("exec", map[string]any{"command": "echo still alive"}), "still alive")
}

func TestAttackHugeWrite(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	f := attack(t, nil)
	res := f.call("exec", map[string]any{"command": "dd if=/dev/zero of=huge bs=1M count=10240 2>&1"})
	expectOK(t, res, "Exit code: 153", "file size limit (tools.exec.limits.fileSizeMb) was exceeded")
	fi, err := os.Stat(filepath.Join(f.ws(), "huge"))
	if err != nil {
		t.Fatalf("stat huge: %v", err)
	}
	if fi.Size() > f.cfg.Exec.Limits.FileSizeMB<<20 {
		t.Fatalf("huge is %d bytes, above the file size limit", fi.Size())
	}
}

func TestAttackDevZero(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	f := attack(t, nil)
	// Reading a device or FIFO must not block: a read that began would
	// never end (the FIFO has no writer, /dev/zero no end), so a refusal
	// for each, and grep's answer, are the proof.
	expectErr(t, f.call("read_file", map[string]any{"path": "/dev/zero"}), kindDenied)
	expectOK(t, f.call("exec", map[string]any{"command": "ln -s /dev/zero z && mkfifo fifo && echo ok"}), "ok")
	expectErr(t, f.call("read_file", map[string]any{"path": "z"}), kindDenied, "outside the workspace")
	expectErr(t, f.call("read_file", map[string]any{"path": "fifo"}), kindDenied, "FIFO")
	expectOK(t, f.call("grep", map[string]any{"pattern": "x"}), "No matches")
}

func TestAttackHugeOutput(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	f := attack(t, nil)
	res := f.call("exec", map[string]any{"command": "head -c 100000000 /dev/zero | tr '\\0' 'A'; echo; echo LAST-LINE"})
	expectOK(t, res, "bytes of output omitted", "LAST-LINE", "(output was 100000011 bytes; the middle was left out)")
	if n := len(res.GetContent()); n > 10_500 {
		t.Errorf("result of %d chars", n)
	}
}

func TestAttackIgnoresSIGTERM(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	f := attack(t, nil)
	// Durations no other process on the machine sleeps, so that the
	// search below finds only this command's children.
	frac := fmt.Sprintf(".%09d", time.Now().UnixNano()%1e9)
	child, parent := "300"+frac, "301"+frac
	res := f.call("exec", map[string]any{"command": "trap '' TERM INT HUP; (trap '' TERM; sleep " + child + ") & sleep " + parent + "; wait", "timeout": 1})
	expectErr(t, res, kindTimeout, "timed out after 1s")
	// A command that ignores SIGTERM is still killed: the answer comes
	// whether or not its children die, so the proof is that none is left.
	waitFor(t, func() bool {
		for _, d := range mustGlob("/proc/[0-9]*/cmdline") {
			data, _ := os.ReadFile(d)
			if s := string(data); s == "sleep\x00"+child+"\x00" || s == "sleep\x00"+parent+"\x00" {
				return false
			}
		}
		return true
	})
}

func mustGlob(p string) []string {
	m, _ := filepath.Glob(p)
	return m
}
