package mcp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
)

// systemPath is the PATH of a stdio server unless its env sets one.
const systemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// launcher builds the commands of stdio servers, confined as the runner's
// sandbox config says (tools.exec: mode, limits, host uid).
type launcher struct {
	cfg       sandbox.Config
	probe     func(context.Context) error
	lookupEnv func(string) (string, bool)
	log       *slog.Logger

	once       sync.Once
	prlimit    string
	prlimitErr error
	bwrap      sandbox.BwrapFeatures
}

// owner returns the host ids servers run as when the runner is root.
func (l *launcher) owner() (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	return l.cfg.HostUID, l.cfg.HostGID, true
}

func (l *launcher) init(ctx context.Context) {
	l.once.Do(func() {
		p, err := exec.LookPath(l.cfg.PrlimitPath)
		if err == nil {
			p, err = filepath.Abs(p)
		}
		l.prlimit, l.prlimitErr = p, err
		if l.cfg.Sandbox == sandbox.ModeBwrap {
			l.bwrap = sandbox.ProbeBwrap(ctx, l.cfg.BwrapPath)
		}
	})
}

// process is a started stdio server's confinement: what to close after
// start, and how to kill what is left of it.
type process struct {
	cmd     *exec.Cmd
	closeFn []func()
}

// afterStart closes the parent's copies of the child's extra files.
func (p *process) afterStart() {
	for _, f := range p.closeFn {
		f()
	}
	p.closeFn = nil
}

// kill ends the server's whole process group. In bwrap mode that takes
// the sandbox's PID namespace with it.
func (p *process) kill() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// command builds the (not yet started) command of server name. home is
// its private directory, created here. The sandbox must be available
// (probe) unless the mode is "none".
func (l *launcher) command(ctx context.Context, name string, c ServerConfig, home string, stderr io.Writer) (*process, error) {
	l.init(ctx)
	if l.prlimitErr != nil {
		return nil, fmt.Errorf("%w: prlimit (util-linux) not found as %q, so the server's rlimits cannot be applied: %v", sandbox.ErrSandboxUnavailable, l.cfg.PrlimitPath, l.prlimitErr)
	}
	if l.probe != nil {
		if err := l.probe(ctx); err != nil {
			return nil, fmt.Errorf("stdio MCP servers run in the exec sandbox: %w", err)
		}
	}
	if err := l.makeHome(home); err != nil {
		return nil, err
	}
	// Retried with backoff like any start failure: once the directory is
	// opened, the server comes up without a restart.
	if uid, _, ok := l.owner(); ok {
		if err := sandbox.Reachable(home, uid); err != nil {
			return nil, err
		}
	}
	cwd := c.Cwd
	if cwd == "" {
		cwd = home
	}
	env := l.env(c, home)
	inner := append(l.prlimitArgs(), c.Command)
	inner = append(inner, c.Args...)
	p := &process{}
	var cmd *exec.Cmd
	if l.cfg.Sandbox == sandbox.ModeBwrap {
		files, closers, err := userFiles(home)
		if err != nil {
			return nil, err
		}
		envR, err := sandbox.EnvArgs(env)
		if err != nil {
			for _, c := range closers {
				c()
			}
			return nil, err
		}
		files = append(files, envR)
		p.closeFn = append(closers, func() { envR.Close() })
		args := l.bwrapArgs(c, home, cwd)
		cmd = exec.Command(l.cfg.BwrapPath, append(append(args, "--"), inner...)...)
		cmd.ExtraFiles = files
		cmd.Env = []string{"PATH=" + systemPath}
	} else {
		cmd = exec.Command(inner[0], inner[1:]...)
		cmd.Dir = cwd
		cmd.Env = env
	}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if uid, gid, ok := l.owner(); ok {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	cmd.WaitDelay = waitDelay
	p.cmd = cmd
	l.log.Debug("MCP server command", "server", name, "sandbox", l.cfg.Sandbox, "network", c.Network, "argv", cmd.Args)
	return p, nil
}

// makeHome creates a server's private directory, owned by the user the
// server runs as.
func (l *launcher) makeHome(home string) error {
	if err := os.MkdirAll(filepath.Dir(home), 0o755); err != nil {
		return fmt.Errorf("MCP server directory: %w", err)
	}
	if err := os.Mkdir(home, 0o700); err != nil && !os.IsExist(err) {
		return fmt.Errorf("MCP server directory: %w", err)
	}
	if uid, gid, ok := l.owner(); ok {
		if err := os.Chown(home, uid, gid); err != nil {
			return fmt.Errorf("MCP server directory: %w", err)
		}
	}
	return nil
}

// env is the server's environment: the fixed variables, the exec
// sandbox's pass-through list, then the server's own env.
func (l *launcher) env(c ServerConfig, home string) []string {
	vars := map[string]string{"PATH": systemPath, "HOME": home, "LANG": "C.UTF-8"}
	if l.cfg.Sandbox == sandbox.ModeBwrap {
		vars["TMPDIR"] = "/tmp"
	}
	for _, name := range l.cfg.Env {
		if v, ok := l.lookupEnv(name); ok {
			vars[name] = v
		}
	}
	if k, v, ok := dataPathEnv(c, home); ok {
		vars[k] = v
	}
	maps.Copy(vars, c.Env)
	out := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		out = append(out, k+"="+vars[k])
	}
	return out
}

// prlimitArgs are the exec sandbox's rlimits, except the CPU time limit:
// a server lives for days and would be killed by SIGXCPU.
func (l *launcher) prlimitArgs() []string {
	lim := l.cfg.Limits
	lim.CPUSeconds = 0
	return lim.PrlimitArgs(l.prlimit, lim.FileSizeMB<<20)
}

// bwrapArgs confine a server as the exec sandbox confines a command, with
// the server's home (and cwd) instead of a workspace; its environment
// comes through fd 5 (see [sandbox.EnvArgs]), after passwd and group.
func (l *launcher) bwrapArgs(c ServerConfig, home, cwd string) []string {
	a := l.bwrap.SystemArgs(c.Network, 3, l.cfg.TmpSizeMB)
	for _, p := range c.ReadOnlyPaths {
		a = append(a, "--ro-bind", p, p)
	}
	a = append(a, "--bind", home, home)
	if cwd != home {
		a = append(a, "--bind", cwd, cwd)
	}
	return append(a, "--remount-ro", "/", "--chdir", cwd, "--args", "5")
}

// userFiles makes the generated /etc/passwd and /etc/group (fds 3 and 4
// in the child) and returns the closers of the parent's copies.
func userFiles(home string) ([]*os.File, []func(), error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nnobody:x:%d:%d:MCP server:%s:/bin/sh\n", sandbox.UID, sandbox.GID, home)
	group := fmt.Sprintf("root:x:0:\nnogroup:x:%d:\n", sandbox.GID)
	var files []*os.File
	var closers []func()
	for _, content := range []string{passwd, group} {
		r, w, err := os.Pipe()
		if err != nil {
			for _, c := range closers {
				c()
			}
			return nil, nil, fmt.Errorf("data pipe: %w", err)
		}
		// A few hundred bytes fit the pipe buffer: no writer goroutine.
		_, werr := io.WriteString(w, content)
		w.Close()
		if werr != nil {
			r.Close()
			for _, c := range closers {
				c()
			}
			return nil, nil, fmt.Errorf("data pipe: %w", werr)
		}
		files = append(files, r)
		closers = append(closers, func() { r.Close() })
	}
	return files, closers, nil
}
