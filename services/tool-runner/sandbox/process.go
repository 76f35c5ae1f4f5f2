package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
)

// pipes makes the status pipe (fd 3 in bwrap) and the generated passwd
// and group files (fds 4 and 5). It returns the read end of the status
// pipe and the files to hand to the child.
func pipes(workspace string) (*os.File, []*os.File, error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("status pipe: %w", err)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nnobody:x:%d:%d:sandbox:%s:/bin/sh\n", UID, GID, workspace)
	group := fmt.Sprintf("root:x:0:\nnogroup:x:%d:\n", GID)
	files := []*os.File{statusW}
	for _, content := range []string{passwd, group} {
		r, w, err := os.Pipe()
		if err != nil {
			statusR.Close()
			for _, f := range files {
				f.Close()
			}
			return nil, nil, fmt.Errorf("data pipe: %w", err)
		}
		// A few hundred bytes fit the pipe buffer: no writer goroutine.
		_, werr := io.WriteString(w, content)
		w.Close()
		if werr != nil {
			r.Close()
			statusR.Close()
			return nil, nil, fmt.Errorf("data pipe: %w", werr)
		}
		files = append(files, r)
	}
	return statusR, files, nil
}

// sandboxInit is bwrap's child, the init of the sandbox's PID namespace:
// killing it kills everything in the sandbox. bwrap's --die-with-parent
// normally does that when bwrap is killed, but a bwrap killed while its
// child is still setting up can leave the child running the command
// unparented (seen under load: a timed-out command's processes lived on).
// The process is held by pidfd (os.FindProcess), so a kill never reaches
// a reused pid.
type sandboxInit struct {
	mu   sync.Mutex
	proc *os.Process
	dead bool
}

func (s *sandboxInit) set(pid int) {
	p, err := os.FindProcess(pid)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil || s.dead {
		_ = p.Release()
		return
	}
	s.proc = p
}

func (s *sandboxInit) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		_ = s.proc.Kill()
	}
}

func (s *sandboxInit) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		_ = s.proc.Release()
	}
	s.proc, s.dead = nil, true
}

// readExitStatus reads bwrap's JSON status stream, passes on the
// sandbox init's pid, and reports whether the command ran to an exit
// status (bwrap writes "exit-code" only then).
func readExitStatus(r io.Reader, childPID func(int)) bool {
	dec := json.NewDecoder(r)
	ran := false
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			return ran
		}
		if pid, ok := doc["child-pid"].(float64); ok && pid > 0 {
			childPID(int(pid))
		}
		if _, ok := doc["exit-code"]; ok {
			ran = true
		}
	}
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// SignalNote explains an exit status of 128+n caused by a signal that
// usually means a limit was hit; "" otherwise.
func (o *Outcome) SignalNote() string {
	switch o.ExitCode - 128 {
	case int(syscall.SIGXFSZ):
		if o.QuotaBound {
			return "killed by SIGXFSZ: a file grew past what the workspace's quota has left (tools.workspace.quotaBytes, or the disk's free space); delete files to make room"
		}
		return "killed by SIGXFSZ: the file size limit (tools.exec.limits.fileSizeMb) was exceeded"
	case int(syscall.SIGXCPU):
		return "killed by SIGXCPU: the CPU time limit (tools.exec.limits.cpuSeconds) was exceeded"
	case int(syscall.SIGKILL):
		return "killed by SIGKILL (possibly out of memory)"
	case int(syscall.SIGSEGV):
		return "killed by SIGSEGV (segmentation fault; the address-space limit tools.exec.limits.addressSpaceMb may be too low)"
	case int(syscall.SIGABRT):
		return "killed by SIGABRT (aborted; possibly out of memory under tools.exec.limits.addressSpaceMb)"
	}
	return ""
}
