package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nanofleet/nanofleet/pkg/observe"
)

const (
	// systemPath is the PATH of every command.
	systemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// DefaultMaxOutput is how many bytes of output a command keeps.
	DefaultMaxOutput = 10_000
	// reprobeAfter is how long a failed probe is trusted before the next
	// command probes again.
	reprobeAfter = 30 * time.Second
	// waitDelay bounds the wait for output pipes after the command ended
	// or was killed.
	waitDelay = 2 * time.Second
)

// etcFiles are the parts of /etc a sandbox sees; passwd and group are
// generated.
var etcFiles = []string{
	"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/localtime", "/etc/nsswitch.conf", "/etc/mime.types", "/etc/hosts",
	"/etc/os-release", "/etc/timezone",
}

// etcNetworkFiles are added when the sandbox has network.
var etcNetworkFiles = []string{
	"/etc/resolv.conf", "/etc/gai.conf", "/etc/host.conf", "/etc/ssl", "/etc/ca-certificates", "/etc/pki",
}

// systemDirs are bound read-only, or recreated as symlinks where the
// host has merged /usr.
var systemDirs = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// Spec is one command to run.
type Spec struct {
	// Command is run by /bin/sh -c.
	Command string
	// Workspace is the host directory bound read-write. Required.
	Workspace string
	// Dir is the working directory, a host path inside Workspace;
	// default Workspace.
	Dir string
	// Timeout bounds the run; the process group is killed when it
	// passes. Required.
	Timeout time.Duration
	// MaxOutput is how many bytes of output are kept (head and tail);
	// default [DefaultMaxOutput].
	MaxOutput int
	// ReadOnly are bound read-only over the workspace (bwrap mode), so
	// the command can neither change nor rename nor remove them.
	ReadOnly []Bind
	// FileSizeLimit, when nonzero, lowers RLIMIT_FSIZE to this many
	// bytes (a workspace's remaining quota); negative: no file may grow.
	FileSizeLimit int64
}

// Bind is a file or directory opened by the caller (O_PATH is enough)
// and the path inside the sandbox it is bound to. Passing an open file
// rather than a path means bubblewrap, which resolves paths as the host
// user, never follows a symlink the sandbox planted meanwhile.
type Bind struct {
	File *os.File
	Dest string
}

// Outcome is how a command ended.
type Outcome struct {
	// Output is stdout and stderr interleaved, head and tail kept.
	Output string
	// OutputBytes is how much the command printed in all.
	OutputBytes int64
	// Truncated reports that the middle of the output was dropped.
	Truncated bool
	// ExitCode is the command's exit status; 128+n for a signal n; -1
	// when the runner killed it.
	ExitCode int
	// TimedOut reports that the timeout killed the command.
	TimedOut bool
	// Duration is the wall time of the run.
	Duration time.Duration
	// QuotaBound reports that the file size limit the command ran under
	// was the workspace's remaining quota (Spec.FileSizeLimit), not
	// Limits.FileSizeMB.
	QuotaBound bool
}

// Executor runs commands confined as its config says. It is safe for
// concurrent use.
type Executor struct {
	cfg       Config
	log       *slog.Logger
	lookupEnv func(string) (string, bool)

	mu          sync.Mutex
	probedAt    time.Time
	probeErr    error
	bwrapPath   string
	prlimitPath string
	bwrap       BwrapFeatures
}

// ExecutorOption changes an Executor.
type ExecutorOption func(*Executor)

// WithLookupEnv replaces os.LookupEnv as the source of passed-through
// environment variables (for tests).
func WithLookupEnv(f func(string) (string, bool)) ExecutorOption {
	return func(e *Executor) { e.lookupEnv = f }
}

// WithLogger sets the executor's logger; the default discards.
func WithLogger(l *slog.Logger) ExecutorOption {
	return func(e *Executor) { e.log = observe.OrDiscard(l) }
}

// NewExecutor validates cfg and returns an Executor. It does not probe;
// the first [Executor.Run] or an explicit [Executor.Probe] does. It marks
// the descriptors the process inherited close-on-exec, so that no
// command (nor an MCP server the process starts) gets them.
func NewExecutor(cfg Config, opts ...ExecutorOption) (*Executor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := closeInheritedOnExec(); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	e := &Executor{cfg: cfg, log: slog.New(slog.DiscardHandler), lookupEnv: os.LookupEnv}
	for _, o := range opts {
		o(e)
	}
	return e, nil
}

// Mode is the executor's sandbox mode.
func (e *Executor) Mode() Mode { return e.cfg.Sandbox }

// Owner returns the host ids commands run as when they differ from the
// runner's (the runner is root): workspaces must be owned by them, see
// [WithOwner]. ok is false when commands run as the runner's own user.
func (e *Executor) Owner() (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	return e.cfg.HostUID, e.cfg.HostGID, true
}

// credential drops a root runner's commands to the configured host ids.
func (e *Executor) credential() *syscall.Credential {
	uid, gid, ok := e.Owner()
	if !ok {
		return nil
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
}

// Probe checks that commands can run as configured: prlimit is there and,
// in bwrap mode, bubblewrap starts a sandbox with every option used for
// real commands. A success is remembered; a failure for 30 s, then the
// next call probes again. The error says why, wrapping
// [ErrSandboxUnavailable].
func (e *Executor) Probe(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.probedAt.IsZero() && (e.probeErr == nil || time.Since(e.probedAt) < reprobeAfter) {
		return e.probeErr
	}
	e.probeErr = e.probe(ctx)
	e.probedAt = time.Now()
	if e.probeErr != nil {
		e.log.Error("exec refused: sandbox unavailable", "mode", e.cfg.Sandbox, "err", e.probeErr)
	} else {
		e.log.Info("sandbox ready", "mode", e.cfg.Sandbox, "bwrap", e.bwrapPath, "network", e.cfg.Network)
	}
	return e.probeErr
}

func (e *Executor) probe(ctx context.Context) error {
	prl, err := exec.LookPath(e.cfg.PrlimitPath)
	if err != nil {
		return fmt.Errorf("%w: prlimit (util-linux) not found as %q, so rlimits cannot be applied: %v", ErrSandboxUnavailable, e.cfg.PrlimitPath, err)
	}
	if prl, err = filepath.Abs(prl); err != nil {
		return fmt.Errorf("%w: %v", ErrSandboxUnavailable, err)
	}
	e.prlimitPath = prl
	if e.cfg.Sandbox == ModeNone {
		return nil
	}
	bw, err := exec.LookPath(e.cfg.BwrapPath)
	if err != nil {
		return fmt.Errorf("%w: bubblewrap not found as %q (%v); install bubblewrap, or set tools.exec.sandbox to \"none\" to run commands unconfined", ErrSandboxUnavailable, e.cfg.BwrapPath, err)
	}
	e.bwrapPath = bw
	e.bwrap = ProbeBwrap(ctx, bw)
	dir, err := os.MkdirTemp("", "nanofleet-sandbox-probe-")
	if err != nil {
		return fmt.Errorf("%w: probe workspace: %v", ErrSandboxUnavailable, err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("%w: probe workspace: %v", ErrSandboxUnavailable, err)
	}
	if uid, gid, ok := e.Owner(); ok {
		if err := os.Chown(dir, uid, gid); err != nil {
			return fmt.Errorf("%w: probe workspace: %v", ErrSandboxUnavailable, err)
		}
	}
	out, err := e.run(ctx, Spec{Command: "exit 0", Workspace: dir, Timeout: 10 * time.Second, MaxOutput: 2000})
	if err != nil {
		return fmt.Errorf("%w: bubblewrap probe failed: %v", ErrSandboxUnavailable, err)
	}
	if out.ExitCode != 0 {
		return fmt.Errorf("%w: bubblewrap probe exited %d: %s", ErrSandboxUnavailable, out.ExitCode, strings.TrimSpace(out.Output))
	}
	return nil
}

// Run runs spec.Command confined. It returns an error, and no outcome,
// when the command is refused ([ErrSandboxUnavailable]) or could not
// start; when the timeout killed it, the outcome with the output so far
// and an error matching [ErrTimeout]; when ctx was cancelled, the outcome
// and ctx's error.
func (e *Executor) Run(ctx context.Context, spec Spec) (*Outcome, error) {
	if spec.Workspace == "" || spec.Timeout <= 0 {
		return nil, errors.New("sandbox: Spec needs Workspace and a positive Timeout")
	}
	if err := e.Probe(ctx); err != nil {
		return nil, err
	}
	// Checked at every run, so that the chmod it asks for takes effect
	// without a restart.
	if uid, _, ok := e.Owner(); ok {
		if err := Reachable(spec.Workspace, uid); err != nil {
			return nil, err
		}
	}
	out, err := e.run(ctx, spec)
	if err != nil {
		return out, err
	}
	return out, nil
}

func (e *Executor) run(ctx context.Context, spec Spec) (*Outcome, error) {
	if spec.Dir == "" {
		spec.Dir = spec.Workspace
	}
	if spec.MaxOutput <= 0 {
		spec.MaxOutput = DefaultMaxOutput
	}
	capture := NewHeadTail(spec.MaxOutput)
	runCtx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()

	env := e.env(spec.Workspace)
	limits, quotaBound := e.prlimitArgs(spec.FileSizeLimit)
	inner := append(limits, "/bin/sh", "-c", spec.Command)
	var (
		cmd       *exec.Cmd
		statusR   *os.File
		parentEnd []*os.File // our copies of the child's ends, closed after start
	)
	if e.cfg.Sandbox == ModeBwrap {
		var files []*os.File
		var err error
		statusR, files, err = pipes(spec.Workspace)
		if err != nil {
			return nil, err
		}
		defer statusR.Close()
		envR, err := EnvArgs(env)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, err
		}
		parentEnd = append(files, envR)
		args := append(e.bwrapArgs(spec), "--")
		cmd = exec.CommandContext(runCtx, e.bwrapPath, append(args, inner...)...)
		cmd.ExtraFiles = files
		for _, b := range spec.ReadOnly {
			cmd.ExtraFiles = append(cmd.ExtraFiles, b.File)
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, envR)
	} else {
		cmd = exec.CommandContext(runCtx, inner[0], inner[1:]...)
		cmd.Dir = spec.Dir
	}
	cmd.Env = env
	cmd.Stdout = capture
	cmd.Stderr = capture
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: e.credential()}
	var sandboxInit sandboxInit
	defer sandboxInit.release()
	cmd.Cancel = func() error {
		// The whole process group; in bwrap mode bwrap's death takes the
		// sandbox's PID namespace with it (--die-with-parent), and the
		// namespace's init is killed as well for when it does not.
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		sandboxInit.kill()
		return err
	}
	cmd.WaitDelay = waitDelay

	start := time.Now()
	err := cmd.Start()
	for _, f := range parentEnd {
		f.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("start command: %w", err)
	}
	statusDone := make(chan bool, 1)
	if statusR != nil {
		go func() { statusDone <- readExitStatus(statusR, sandboxInit.set) }()
	} else {
		statusDone <- true
	}
	waitErr := cmd.Wait()
	out := &Outcome{
		Output:      capture.String(),
		OutputBytes: capture.Total(),
		Truncated:   capture.Truncated(),
		ExitCode:    exitCode(cmd.ProcessState),
		Duration:    time.Since(start),
		QuotaBound:  quotaBound,
	}
	var ran bool
	select {
	case ran = <-statusDone:
	case <-time.After(waitDelay):
	}
	if runCtx.Err() != nil {
		// Cancel may have run before the status pipe named the init.
		sandboxInit.kill()
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		out.ExitCode = -1
		return out, fmt.Errorf("command cancelled: %w", ctx.Err())
	case runCtx.Err() != nil: // our timeout, or the caller's deadline
		out.TimedOut = true
		out.ExitCode = -1
		return out, fmt.Errorf("%w after %s; the command and everything it started were killed", ErrTimeout, spec.Timeout)
	case !ran:
		return nil, fmt.Errorf("%w: bubblewrap could not start the command: %s", ErrSandboxUnavailable, strings.TrimSpace(out.Output))
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return out, fmt.Errorf("wait for command: %w", waitErr)
	}
	return out, nil
}
