package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/toolclient"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"

	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox/sandboxtest"
)

// runnerProc is a tool-runner process.
type runnerProc struct {
	cmd    *exec.Cmd
	ready  chan struct{}
	exited chan struct{}
	log    strings.Builder
	mu     sync.Mutex
}

// startRunner starts the binary and waits until it serves.
func startRunner(t *testing.T, bin, natsURL, config string) *runnerProc {
	t.Helper()
	cmd := exec.Command(bin, "--nats", natsURL, "--config", config, "--http", "", "--log-level", "info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &runnerProc{cmd: cmd, ready: make(chan struct{}), exited: make(chan struct{})}
	t.Cleanup(func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		bustest.Receive(t, p.exited, 30*time.Second)
	})
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if !once && strings.Contains(sc.Text(), "tool-runner serving") {
				once = true
				close(p.ready)
			}
		}
		cmd.Wait()
	}()
	select {
	case <-p.ready:
	case <-p.exited:
		t.Fatalf("tool-runner exited: %s", p.output())
	case <-time.After(30 * time.Second):
		t.Fatalf("tool-runner did not start within 30s: %s", p.output())
	}
	return p
}

func (p *runnerProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *runnerProc) kill(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// TestTwoRunnersOneKilled runs two tool-runner processes on one fleet and
// kills the one handling a call: a read-only call is retried on the
// other and succeeds; an exec is reported as interrupted, not re-run.
func TestTwoRunnersOneKilled(t *testing.T) {
	sandboxtest.RequireBwrap(t)
	dir := sandboxtest.BaseDir(t)
	bin := filepath.Join(dir, "tool-runner")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root := filepath.Join(dir, "workspaces")
	cfg := map[string]any{"tools": map[string]any{
		"workspace": map[string]any{"root": root},
		"exec":      map[string]any{"timeout": 60, "limits": map[string]any{"processes": 64, "fileSizeMb": 16}},
		"web":       map[string]any{"fetch": map[string]any{"allowCIDRs": []string{"127.0.0.0/8"}}},
		"runner":    map[string]any{"heartbeatMs": 100},
	}}
	data, _ := json.Marshal(cfg)
	config := filepath.Join(dir, "config.json")
	if err := os.WriteFile(config, data, 0o644); err != nil {
		t.Fatal(err)
	}

	srv := bustest.StartServer(t)
	b := srv.Connect(t, "")
	client, err := toolclient.New(b, toolclient.WithLivenessTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	call := func(name string, args any) chan *nanofleetv1.ToolResult {
		out := make(chan *nanofleetv1.ToolResult, 1)
		raw, _ := json.Marshal(args)
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			res, err := client.Call(ctx, &nanofleetv1.ToolRequest{CallId: "c-" + name, Name: name, ArgumentsJson: string(raw), SessionKey: "cli:test"})
			if err != nil {
				res = &nanofleetv1.ToolResult{IsError: true, Content: "client error: " + err.Error()}
			}
			out <- res
		}()
		return out
	}
	wait := func(ch chan *nanofleetv1.ToolResult) *nanofleetv1.ToolResult {
		t.Helper()
		select {
		case res := <-ch:
			return res
		case <-time.After(60 * time.Second):
			t.Fatal("no result within 60s")
			return nil
		}
	}

	t.Run("read-only call is retried", func(t *testing.T) {
		var requests atomic.Int32
		arrived := make(chan struct{})
		page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if requests.Add(1) == 1 {
				close(arrived)
				<-r.Context().Done() // until the runner that asked dies
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "served on the second try")
		}))
		defer page.Close()

		a := startRunner(t, bin, srv.ClientURL(), config)
		result := call("web_fetch", map[string]any{"url": page.URL})
		select {
		case <-arrived:
		case <-time.After(30 * time.Second):
			t.Fatal("the fetch never reached the page")
		}
		startRunner(t, bin, srv.ClientURL(), config)
		a.kill(t)
		res := wait(result)
		if res.GetIsError() || !strings.Contains(res.GetContent(), "served on the second try") {
			t.Fatalf("result: %s %s", res.GetErrorKind(), res.GetContent())
		}
		if n := requests.Load(); n != 2 {
			t.Errorf("page requested %d times, want 2", n)
		}
	})

	t.Run("exec is interrupted, not retried", func(t *testing.T) {
		// Only one runner is up when the call is sent, so it is the one
		// killed; a second one is up before the kill.
		first := startRunner(t, bin, srv.ClientURL(), config)
		marker := filepath.Join(root, "runs.log")
		result := call("exec", map[string]any{"command": "echo run >> runs.log; sleep 297; echo finished"})
		bustest.Eventually(t, 30*time.Second, func() error {
			if data, err := os.ReadFile(marker); err != nil || len(data) == 0 {
				return errors.New("the command never started")
			}
			return nil
		})
		startRunner(t, bin, srv.ClientURL(), config)
		first.kill(t)
		res := wait(result)
		if !res.GetIsError() || res.GetErrorKind() != nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_INTERRUPTED ||
			!strings.Contains(res.GetContent(), "interrupted") || !strings.Contains(res.GetContent(), "not retried") {
			t.Fatalf("result: %s %s", res.GetErrorKind(), res.GetContent())
		}
		data, _ := os.ReadFile(marker)
		if runs := strings.Count(string(data), "run"); runs != 1 {
			t.Errorf("the command ran %d times", runs)
		}
		// The sandboxed command died with its runner (--die-with-parent).
		bustest.Eventually(t, 10*time.Second, func() error {
			if sleeping(297) {
				return errors.New("the killed runner's command is still running")
			}
			return nil
		})
	})

	// An operator who stops the service sees it stop, and why: SIGTERM is
	// a requested stop, logged as such, with exit status 0.
	t.Run("SIGTERM is logged and exits 0", func(t *testing.T) {
		p := startRunner(t, bin, srv.ClientURL(), config)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		bustest.Receive(t, p.exited, 30*time.Second)
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("exit status %d, want 0", code)
		}
		out := p.output()
		for _, want := range []string{`"msg":"tool-runner stopping"`, `"why":"terminated signal received"`, `"msg":"tool-runner stopped","service":"tool-runner","after":`} {
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %s:\n%s", want, out)
			}
		}
		if n := strings.Count(out, `"msg":"tool-runner stopped"`); n != 1 {
			t.Errorf("\"tool-runner stopped\" logged %d times, want once:\n%s", n, out)
		}
	})
}

func sleeping(secs int) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		if string(data) == fmt.Sprintf("sleep\x00%d\x00", secs) {
			return true
		}
	}
	return false
}
