package mcptest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// HTTP runs server-everything (bin) over streamable HTTP as a child
// process on a free loopback port and returns its URL; the process is
// killed by pid at cleanup.
func HTTP(t testing.TB, bin string) (string, *os.Process) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	proc := StartHTTP(t, bin, port)
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port), proc
}

// StartHTTP runs server-everything over streamable HTTP on port and
// returns once it listens; the process is killed by pid at cleanup.
func StartHTTP(t testing.TB, bin string, port int) *os.Process {
	t.Helper()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
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
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				close(listening)
				break
			}
		}
		for sc.Scan() { // drain, so the server never blocks on stderr
		}
	}()
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		kill()
		t.Fatal("server-everything (streamable HTTP) did not start listening within 30 s")
	}
	return cmd.Process
}
