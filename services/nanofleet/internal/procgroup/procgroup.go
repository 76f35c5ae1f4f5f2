// Package procgroup runs a program as a child process in a process group
// of its own, keeping the start of its output: killing the group kills
// whatever the program started too. The bench and the fleet's
// multi-process tests start the service binaries with it.
package procgroup

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/nanofleet/nanofleet/pkg/syncbuf"
)

// Proc is a started process.
type Proc struct {
	// Name names the process in errors.
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	out  *syncbuf.Buffer
}

// Start runs bin with args in a process group of its own, with env added
// to an environment of PATH alone. The first keep bytes of what it
// prints (stdout and stderr) are kept.
func Start(name, bin string, env []string, keep int, args ...string) (*Proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &syncbuf.Buffer{Max: keep}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, done: make(chan struct{}), out: out}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL to the process group and waits for the process.
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// ExitCode is the process's exit code, once [Proc.Exited] is closed.
func (p *Proc) ExitCode() int { return p.cmd.ProcessState.ExitCode() }

// Output is what the process printed so far (what is kept of it).
func (p *Proc) Output() string { return p.out.String() }

// Tail is at most the last n bytes of [Proc.Output], after "…" when there
// were more.
func (p *Proc) Tail(n int) string { return p.out.Tail(n) }

// WaitPrinted waits until the process has printed s: [ErrExited] when it
// exits first, ctx's error when ctx ends first.
func (p *Proc) WaitPrinted(ctx context.Context, s string) error {
	for {
		grown := p.out.Grown()
		if strings.Contains(p.out.String(), s) {
			return nil
		}
		select {
		case <-grown:
		case <-p.done:
			if strings.Contains(p.out.String(), s) {
				return nil
			}
			return ErrExited
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
