package sandbox

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestReadExitStatus: bwrap's --json-status-fd stream names the sandbox
// init's pid first and the exit code only if the command ran.
func TestReadExitStatus(t *testing.T) {
	cases := []struct {
		name    string
		stream  string
		wantRan bool
		wantPID []int
	}{
		{"ran", `{ "child-pid": 4242 }` + "\n" + `{ "exit-code": 0 }` + "\n", true, []int{4242}},
		{"killed before exit", `{ "child-pid": 17 }` + "\n", false, []int{17}},
		{"setup failed", ``, false, nil},
		{"garbage", `{ "child-pid": "x" } not json`, false, nil},
		{"non-positive pid", `{ "child-pid": 0 }{ "exit-code": 1 }`, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var pids []int
			ran := readExitStatus(strings.NewReader(c.stream), func(pid int) { pids = append(pids, pid) })
			if ran != c.wantRan || !slices.Equal(pids, c.wantPID) {
				t.Errorf("readExitStatus(%q) = %v, pids %v; want %v, %v", c.stream, ran, pids, c.wantRan, c.wantPID)
			}
		})
	}
}

// TestSandboxInitKill: the init named by the status stream is killed by
// pidfd, and after release a kill reaches nothing.
func TestSandboxInitKill(t *testing.T) {
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var s sandboxInit
	s.set(cmd.Process.Pid)
	s.kill()
	err := cmd.Wait()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("sleep after kill: %v", err)
	}
	s.release()
	s.set(cmd.Process.Pid) // after release: ignored
	s.kill()
	if s.proc != nil {
		t.Error("set after release kept a process")
	}
}
