package runner

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"

	"github.com/nanofleet/nanofleet/services/tool-runner/mcp"
	"github.com/nanofleet/nanofleet/services/tool-runner/quota"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/files"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/output"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/patch"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/shell"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/web"
)

// Version of the micro service.
const Version = "0.1.0"

// DefaultAgent is the agent whose workspace is tools.workspace.root
// itself; a request without an agent id is for it.
const DefaultAgent = "default"

// catalogEndpoint names the catalog endpoint; tool names use '_', not
// '-', so it cannot clash with one.
const catalogEndpoint = "tool-catalog"

// DefaultStopGrace is how long running calls get to finish once Run's
// context ends.
const DefaultStopGrace = 30 * time.Second

// Runner serves tools over NATS. Create it with [New], then [Runner.Run]
// it.
type Runner struct {
	cfg     Config
	bus     *bus.Bus
	log     *slog.Logger
	id      string
	exec    *sandbox.Executor
	set     *tools.Set
	sem     chan struct{}
	extra   []tools.Tool
	webOpts []web.Option
	exOpts  []sandbox.ExecutorOption
	mcp     *mcp.Manager // nil without MCP servers
	mcpOpts []mcp.Option
	quota   *quota.Meter
	// keepFree: bytes left free on storeDir's file system when the
	// workspaces share it (WithStoreDisk).
	storeDir string
	keepFree int64

	stopGrace time.Duration
	serving   chan struct{} // closed once Run takes calls

	mu       sync.Mutex
	started  bool
	stopping bool
	svc      micro.Service
	blobs    jetstream.ObjectStore
	wg       sync.WaitGroup
	baseCtx  context.Context
	cancel   context.CancelFunc
}

// Option changes a Runner.
type Option func(*Runner)

// WithLogger sets the runner's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(r *Runner) { r.log = observe.OrDiscard(l) } }

// WithStopGrace sets how long running calls get to finish once Run's
// context ends before they are cancelled (default [DefaultStopGrace]).
func WithStopGrace(d time.Duration) Option { return func(r *Runner) { r.stopGrace = d } }

// WithTools serves extra tools besides the built-in ones.
func WithTools(ts ...tools.Tool) Option { return func(r *Runner) { r.extra = append(r.extra, ts...) } }

// WithWebOptions passes options to the web tools.
func WithWebOptions(opts ...web.Option) Option {
	return func(r *Runner) { r.webOpts = append(r.webOpts, opts...) }
}

// WithExecutorOptions passes options to the sandbox executor.
func WithExecutorOptions(opts ...sandbox.ExecutorOption) Option {
	return func(r *Runner) { r.exOpts = append(r.exOpts, opts...) }
}

// WithMCPOptions passes options to the MCP manager.
func WithMCPOptions(opts ...mcp.Option) Option {
	return func(r *Runner) { r.mcpOpts = append(r.mcpOpts, opts...) }
}

// WithStoreDisk tells the runner where the message store keeps its data
// (dir): when the workspaces share its file system, writes and commands
// leave keepFree bytes of it free whatever the quota allows, so that a
// session cannot fill the disk the store needs. Negative values are
// taken as 0 (nothing kept).
func WithStoreDisk(dir string, keepFree int64) Option {
	return func(r *Runner) { r.storeDir, r.keepFree = dir, max(keepFree, 0) }
}

// New validates cfg and builds the tool set. It does not touch the bus.
func New(cfg Config, b *bus.Bus, opts ...Option) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, bus: b, id: nuid.Next(), sem: make(chan struct{}, cfg.Runner.MaxConcurrent)}
	r.log, r.stopGrace, r.serving = slog.New(slog.DiscardHandler), DefaultStopGrace, make(chan struct{})
	for _, o := range opts {
		o(r)
	}
	limits := quota.Limits{Bytes: cfg.Workspace.QuotaBytes, Files: cfg.Workspace.QuotaFiles}
	if r.storeDir != "" && sameDevice(cfg.Workspace.Root, r.storeDir) {
		limits.KeepFree = r.keepFree
	}
	r.quota = quota.NewMeter(limits, quotaTTL)
	r.log = r.log.With("component", "tool-runner", "runner", r.id)
	ex, err := sandbox.NewExecutor(cfg.Exec.Config, append([]sandbox.ExecutorOption{sandbox.WithLogger(r.log)}, r.exOpts...)...)
	if err != nil {
		return nil, err
	}
	r.exec = ex
	if len(cfg.MCPServers) > 0 {
		r.mcp, err = mcp.New(mcp.Options{
			Servers: cfg.MCPServers, Sandbox: cfg.Exec.Config, Probe: ex.Probe,
			DataDir: filepath.Clean(cfg.Workspace.Root) + "-mcp",
		}, append([]mcp.Option{mcp.WithLogger(r.log)}, r.mcpOpts...)...)
		if err != nil {
			return nil, err
		}
	}
	execTool, err := shell.New(cfg.Exec, ex)
	if err != nil {
		return nil, err
	}
	webTools, err := web.New(cfg.Web, r.webOpts...)
	if err != nil {
		return nil, err
	}
	all := append(files.All(), execTool, patch.Tool(), output.Tool())
	all = append(all, webTools...)
	all = append(all, r.extra...)
	if r.set, err = tools.NewSet(all...); err != nil {
		return nil, err
	}
	return r, nil
}

// ID identifies this runner in heartbeats and logs.
func (r *Runner) ID() string { return r.id }

// Tools is the set of built-in tools the runner serves.
func (r *Runner) Tools() *tools.Set { return r.set }

// MCP is the manager of the runner's MCP servers; nil without any.
func (r *Runner) MCP() *mcp.Manager { return r.mcp }

// startTimeout bounds one attempt to start: a long wait for a server
// that died must end in a retry, not hang the start.
const startTimeout = 30 * time.Second

// execTool is the tool whose writes cannot be known before it runs.
const execTool = "exec"

// quotaTTL is how long a workspace's measured usage is trusted between
// commands (other runners and sessions may write to it meanwhile).
const quotaTTL = 10 * time.Second

// WorkspaceDir is where a request's workspace lives; see the package doc.
func (r *Runner) WorkspaceDir(tr *nanofleetv1.ToolRequest) string {
	root := filepath.Clean(r.cfg.Workspace.Root)
	if r.cfg.Workspace.PerSession {
		return filepath.Join(root+"-sessions", subject.Token(tr.GetSessionKey()))
	}
	if agent := tr.GetAgentId(); agent != "" && agent != DefaultAgent {
		return filepath.Join(root+"-agents", subject.Token(agent))
	}
	return root
}

func (r *Runner) openWorkspace(tr *nanofleetv1.ToolRequest) (*sandbox.Workspace, error) {
	var opts []sandbox.WorkspaceOption
	if uid, gid, ok := r.exec.Owner(); ok {
		opts = append(opts, sandbox.WithOwner(uid, gid))
	}
	dir := r.WorkspaceDir(tr)
	if !r.cfg.Workspace.EditableProfile && dir == filepath.Clean(r.cfg.Workspace.Root) {
		opts = append(opts, sandbox.WithReadOnly(ProfilePaths()...))
	}
	ws, err := sandbox.OpenWorkspace(dir, opts...)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	return ws, nil
}

// ProfilePaths are the agent's profile in its workspace: the bootstrap
// files and skills/. Sessions may not change them unless
// tools.workspace.editableProfile is set.
func ProfilePaths() []string {
	return append(append([]string(nil), profile.BootstrapFiles...), "skills")
}

// prepareRoot creates the workspace root and, under a root runner, gives
// it to the sandbox user at once, as every tool call does: what the
// fleet's other parts create in it before the first call (the memory
// file sync's memory/, above all) then takes that owner too, and exec
// can edit it.
func (r *Runner) prepareRoot() error {
	uid, gid, ok := r.exec.Owner()
	if !ok {
		return os.MkdirAll(r.cfg.Workspace.Root, 0o755)
	}
	ws, err := sandbox.OpenWorkspace(r.cfg.Workspace.Root, sandbox.WithOwner(uid, gid))
	if err != nil {
		return err
	}
	return ws.Close()
}

// checkRootReachable reports a workspace root the sandbox user cannot
// reach (bubblewrap binds the workspace as that user).
func (r *Runner) checkRootReachable() error {
	uid, _, ok := r.exec.Owner()
	if !ok {
		return nil
	}
	return sandbox.Reachable(r.cfg.Workspace.Root, uid)
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
