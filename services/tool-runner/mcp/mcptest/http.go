package mcptest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
)

// portAttempts bounds how often HTTP picks a new port when another
// listener took the one it picked before the server could bind it.
const portAttempts = 5

// HTTP runs server-everything (bin) over streamable HTTP as a child
// process on a free loopback port and returns its URL; the process is
// killed by pid at cleanup.
//
// The port is picked by binding port 0 and closing it, so another process
// (an embedded NATS server of a test running beside this one) can take it
// before the server binds; HTTP then tries a new port.
func HTTP(t testing.TB, bin string) (string, *os.Process) {
	t.Helper()
	var errs []error
	for range portAttempts {
		port := bustest.FreePort(t)
		proc, err := startHTTP(t, bin, port)
		if err == nil {
			return fmt.Sprintf("http://127.0.0.1:%d/mcp", port), proc
		}
		errs = append(errs, err)
	}
	t.Fatalf("server-everything (streamable HTTP) did not start on %d ports: %v", portAttempts, errors.Join(errs...))
	return "", nil
}

// StartHTTP runs server-everything over streamable HTTP on port and
// returns once it answers HTTP there; the process is killed by pid at
// cleanup.
func StartHTTP(t testing.TB, bin string, port int) *os.Process {
	t.Helper()
	proc, err := startHTTP(t, bin, port)
	if err != nil {
		t.Fatal(err)
	}
	return proc
}

// startHTTP starts the server and waits until it answers HTTP on
// 127.0.0.1:port. Its "listening" line is not proof: it prints that line
// and then "already in use" when the port is taken, and a listener on
// 127.0.0.1 would get the connections before the server's wildcard one.
func startHTTP(t testing.TB, bin string, port int) (*os.Process, error) {
	t.Helper()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	pid := cmd.Process.Pid
	var once sync.Once
	kill := func() {
		once.Do(func() {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
	}
	t.Cleanup(kill)
	listening := make(chan struct{})
	failed := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		announced := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case !announced && strings.Contains(line, "listening on port"):
				announced = true
				close(listening)
			case strings.Contains(line, "Failed to start"):
				failed <- line
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	select {
	case <-listening:
	case line := <-failed:
		kill()
		return nil, fmt.Errorf("port %d: %s", port, line)
	case <-ctx.Done():
		kill()
		return nil, fmt.Errorf("port %d: server-everything did not start listening within 30 s", port)
	}
	if err := awaitHTTP(ctx, port, failed); err != nil {
		kill()
		return nil, fmt.Errorf("port %d: %w", port, err)
	}
	return cmd.Process, nil
}

// awaitHTTP waits until GET /mcp on 127.0.0.1:port gets an HTTP answer
// (any status), or the server reports that it failed.
func awaitHTTP(ctx context.Context, port int, failed <-chan string) error {
	client := &http.Client{Timeout: 2 * time.Second}
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		last = err
		select {
		case line := <-failed:
			return errors.New(line)
		case <-ctx.Done():
			return fmt.Errorf("no HTTP answer at %s: %w", url, last)
		case <-tick.C:
		}
	}
}
