package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/every"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/pkg/toolclient"
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
func WithLogger(l *slog.Logger) Option { return func(r *Runner) { r.log = l } }

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

// New validates cfg and builds the tool set. It does not touch the bus.
func New(cfg Config, b *bus.Bus, opts ...Option) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, bus: b, id: nuid.Next(), sem: make(chan struct{}, cfg.Runner.MaxConcurrent),
		quota: quota.NewMeter(quota.Limits{Bytes: cfg.Workspace.QuotaBytes, Files: cfg.Workspace.QuotaFiles}, quotaTTL)}
	r.log, r.stopGrace, r.serving = slog.New(slog.DiscardHandler), DefaultStopGrace, make(chan struct{})
	for _, o := range opts {
		o(r)
	}
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

// Run serves tool calls until ctx ends. It opens the object store, probes
// the sandbox and registers the service's endpoints, retrying while NATS
// fails for a transient reason; a sandbox that cannot start is logged, not
// fatal: exec calls are then refused with the reason. [Runner.Serving] is
// closed once calls are taken. When ctx ends Run stops taking calls, lets
// running ones finish within the stop grace ([WithStopGrace]), cancels the
// rest (killing their commands), stops the MCP servers and returns.
func (r *Runner) Run(ctx context.Context) error {
	err := bus.Retry(ctx, bus.Backoff{}, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, startTimeout)
		defer cancel()
		return r.start(ctx)
	}, func(err error, wait time.Duration) {
		r.log.Warn("tool-runner cannot register yet; retrying", "err", err, "retry_in", wait)
	})
	if err != nil {
		return fmt.Errorf("start tool-runner: %w", err)
	}
	close(r.serving)
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.stopGrace)
	defer cancel()
	return r.stop(stopCtx)
}

// Serving is closed once [Runner.Run] takes calls.
func (r *Runner) Serving() <-chan struct{} { return r.serving }

// startTimeout bounds one attempt to start: a long wait for a server
// that died must end in a retry, not hang the start.
const startTimeout = 30 * time.Second

// start opens the object store, probes the sandbox and registers the
// service's endpoints.
func (r *Runner) start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return errors.New("runner: already started")
	}
	blobs, err := r.bus.Blobs(ctx)
	if err != nil {
		return err
	}
	r.blobs = blobs
	if err := os.MkdirAll(r.cfg.Workspace.Root, 0o755); err != nil {
		return fmt.Errorf("tools.workspace.root: %w", err)
	}
	if err := r.exec.Probe(ctx); err != nil {
		r.log.Warn("exec will be refused until the sandbox works", "err", err)
	} else if err := r.checkRootReachable(); err != nil {
		r.log.Warn("exec will fail in workspaces under this root", "err", err)
	}
	if r.mcp != nil {
		r.mcp.Connect(ctx)
		defer func() {
			if !r.started { // Start failed
				_ = r.mcp.Stop(context.WithoutCancel(ctx))
			}
		}()
	}
	r.baseCtx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	svcCfg := micro.Config{
		Name:        toolclient.ServiceName,
		Version:     Version,
		Description: "nanofleet tools: files, exec, web",
		QueueGroup:  toolclient.QueueGroup,
		Metadata:    map[string]string{"runner": r.id},
	}
	svc, err := micro.AddService(r.bus.NC, svcCfg)
	if err != nil {
		r.cancel()
		return fmt.Errorf("register tool-runner service: %w", err)
	}
	for _, def := range r.set.Definitions() {
		err := svc.AddEndpoint(def.Name, micro.HandlerFunc(r.serve(def.Name)),
			micro.WithEndpointSubject(r.bus.Space.ToolCall(def.Name)),
			micro.WithEndpointMetadata(map[string]string{
				"read_only": fmt.Sprint(def.ReadOnly),
				"exclusive": fmt.Sprint(def.Exclusive),
			}))
		if err != nil {
			svc.Stop()
			r.cancel()
			return fmt.Errorf("endpoint %s: %w", def.Name, err)
		}
	}
	// Every runner answers the catalog (no queue group): runners with
	// different MCP servers serve different tools; the client merges.
	if err := svc.AddEndpoint(catalogEndpoint, micro.HandlerFunc(r.serveCatalog),
		micro.WithEndpointSubject(toolclient.CatalogSubject(r.bus.Space)),
		micro.WithEndpointQueueGroupDisabled()); err != nil {
		svc.Stop()
		r.cancel()
		return fmt.Errorf("catalog endpoint: %w", err)
	}
	// The subscriptions are in place once the server has them.
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	defer fcancel()
	if err := r.bus.NC.FlushWithContext(fctx); err != nil {
		svc.Stop()
		r.cancel()
		return fmt.Errorf("register tool-runner service: %w", err)
	}
	r.svc = svc
	r.started = true
	var mcpTools []string
	if r.mcp != nil {
		r.mcp.Serve(&mcp.MicroPublisher{NC: r.bus.NC, Service: svcCfg, Subject: r.bus.Space.ToolCall,
			Handler: func(name string) micro.Handler { return micro.HandlerFunc(r.serve(name)) }})
		mcpTools = r.mcp.Names()
	}
	r.log.Info("tool-runner serving", "tools", r.set.Names(), "mcpTools", mcpTools, "sandbox", r.exec.Mode(), "workspaces", r.cfg.Workspace.Root, "perSession", r.cfg.Workspace.PerSession)
	return nil
}

// stop stops taking calls and waits for running ones until ctx ends; then
// it cancels them (killing their commands) and returns ctx's error.
func (r *Runner) stop(ctx context.Context) error {
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		return nil
	}
	r.stopping = true
	svc := r.svc
	r.mu.Unlock()

	err := svc.Stop()
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		r.log.Warn("stopping: cancelling calls still running")
		r.cancel()
		<-done
		err = errors.Join(err, ctx.Err())
	}
	r.cancel()
	if r.mcp != nil {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err = errors.Join(err, r.mcp.Stop(mctx))
		cancel()
	}
	r.log.Info("tool-runner stopped")
	return err
}

// serveCatalog answers the built-in definitions, then the MCP ones, each
// sorted by name.
func (r *Runner) serveCatalog(req micro.Request) {
	cat := &nanofleetv1.ToolCatalog{}
	defs := r.set.Definitions()
	if r.mcp != nil {
		defs = append(defs, r.mcp.Definitions()...)
	}
	for _, d := range defs {
		cat.Tools = append(cat.Tools, d.Definition())
	}
	data, err := proto.Marshal(cat)
	if err != nil {
		req.Error("500", err.Error(), nil)
		return
	}
	req.Respond(data)
}

// serve returns the handler of one tool's endpoint. micro delivers an
// endpoint's messages one by one, so each call gets its own goroutine.
func (r *Runner) serve(name string) micro.HandlerFunc {
	return func(req micro.Request) {
		r.mu.Lock()
		if r.stopping {
			r.mu.Unlock()
			req.Respond(nil, micro.WithHeaders(r.headers(toolclient.StatusRejected)))
			return
		}
		r.wg.Add(1)
		r.mu.Unlock()
		r.heartbeat(req.Reply())
		go func() {
			defer r.wg.Done()
			r.handle(name, req)
		}()
	}
}

func (r *Runner) headers(status string) micro.Headers {
	return micro.Headers{toolclient.HeaderStatus: {status}, toolclient.HeaderRunner: {r.id}}
}

func (r *Runner) heartbeat(reply string) {
	if reply == "" {
		return
	}
	msg := nats.NewMsg(reply)
	msg.Header.Set(toolclient.HeaderStatus, toolclient.StatusRunning)
	msg.Header.Set(toolclient.HeaderRunner, r.id)
	if err := r.bus.NC.PublishMsg(msg); err != nil {
		r.log.Debug("heartbeat", "err", err)
	}
}

func (r *Runner) handle(name string, req micro.Request) {
	ctx, cancel := context.WithCancel(r.baseCtx)
	stopBeats := every.Go(ctx, time.Duration(r.cfg.Runner.HeartbeatMs)*time.Millisecond, func() bool {
		r.heartbeat(req.Reply())
		return true
	})
	res := r.call(ctx, name, req.Data())
	cancel()
	stopBeats() // the result is the last message on the inbox
	data, err := proto.Marshal(res)
	if err != nil {
		r.log.Error("encode result", "tool", name, "err", err)
		return
	}
	if err := req.Respond(data, micro.WithHeaders(r.headers(toolclient.StatusDone))); err != nil {
		r.log.Warn("send result", "tool", name, "err", err)
	}
}

// call runs one tool call and always returns a result.
func (r *Runner) call(ctx context.Context, name string, data []byte) *nanofleetv1.ToolResult {
	start := time.Now()
	var tr nanofleetv1.ToolRequest
	if err := proto.Unmarshal(data, &tr); err != nil {
		return &nanofleetv1.ToolResult{IsError: true, ErrorKind: nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_INVALID_ARGUMENTS,
			Content: "Error: malformed tool request: " + err.Error()}
	}
	log := r.log.With("tool", name, "call", tr.GetCallId(), "session", tr.GetSessionKey())
	res := r.run(ctx, log, name, &tr)
	res.CallId = tr.GetCallId()
	if res.IsError {
		log.Info("tool call failed", "kind", res.ErrorKind.String(), "took", time.Since(start), "error", firstLine(res.Content))
	} else {
		log.Debug("tool call", "took", time.Since(start), "chars", len(res.Content))
	}
	return res
}

func (r *Runner) run(ctx context.Context, log *slog.Logger, name string, tr *nanofleetv1.ToolRequest) *nanofleetv1.ToolResult {
	fail := func(err error, partial string) *nanofleetv1.ToolResult {
		content := "Error: " + err.Error()
		if partial != "" {
			content += "\n\n" + partial
		}
		return r.shrink(ctx, name, tr, &nanofleetv1.ToolResult{Content: content, IsError: true, ErrorKind: tools.ErrorKind(err)})
	}
	tool, schema, ok := r.set.Get(name)
	if !ok && r.mcp != nil {
		tool, schema, ok = r.mcp.Get(name)
	}
	if !ok {
		names := r.set.Names()
		if r.mcp != nil {
			names = append(names, r.mcp.Names()...)
		}
		return &nanofleetv1.ToolResult{IsError: true, ErrorKind: nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_UNKNOWN_TOOL,
			Content: fmt.Sprintf("Error: unknown tool %q. Available tools: %v", name, names)}
	}
	args, err := schema.Parse(tr.GetArgumentsJson())
	if err != nil {
		return fail(fmt.Errorf("invalid arguments for %s: %w", name, err), "")
	}
	timeout := time.Duration(r.cfg.Runner.CallTimeout) * time.Second
	if ms := tr.GetTimeoutMs(); ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case r.sem <- struct{}{}:
		defer func() { <-r.sem }()
	case <-ctx.Done():
		return fail(fmt.Errorf("%s waited for a free slot until its deadline: %w", name, ctx.Err()), "")
	}
	ws, err := r.openWorkspace(tr)
	if err != nil {
		log.Error("open workspace", "err", err)
		return fail(err, "")
	}
	defer ws.Close()
	call := &tools.Call{
		ID:         tr.GetCallId(),
		SessionKey: tr.GetSessionKey(),
		AgentID:    tr.GetAgentId(),
		Args:       args,
		Workspace:  ws,
		Blobs:      r.blobs,
		Log:        log,
	}
	out, err := r.runInQuota(ctx, log, name, tool, call, tr)
	if err != nil {
		return fail(err, out.Text)
	}
	return r.shrink(ctx, name, tr, &nanofleetv1.ToolResult{Content: out.Text, Media: out.Media})
}

// runInQuota runs a call within its workspace's quota. The quota applies
// to the built-in tools that write (MCP servers keep their files
// elsewhere): a file tool is refused when it would pass the quota; exec
// may grow no file past what is left, is stopped while it runs once the
// workspace is over, and its result says when it left it over.
func (r *Runner) runInQuota(ctx context.Context, log *slog.Logger, name string, tool tools.Tool, call *tools.Call, tr *nanofleetv1.ToolRequest) (tools.Result, error) {
	ws := call.Workspace
	_, _, builtin := r.set.Get(name)
	if !builtin || tool.Definition().ReadOnly || !r.quota.Limits().On() {
		return tool.Run(ctx, call)
	}
	if name != execTool {
		if err := r.quota.Reserve(ws.Dir(), ws.Root(), writeEstimate(name, tr)); err != nil {
			log.Info("tool call refused by the workspace quota", "err", err)
			return tools.Result{}, err
		}
		return tool.Run(ctx, call)
	}
	left, err := r.quota.Left(ws.Dir(), ws.Root())
	if err != nil {
		return tools.Result{}, err
	}
	call.FileSizeLimit = left
	qctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	watchCtx, endWatch := context.WithCancel(qctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.quota.Watch(watchCtx, ws.Dir(), ws.Root(), stop)
	}()
	out, err := tool.Run(qctx, call)
	endWatch()
	<-watched // the workspace is closed after this returns
	if cause := context.Cause(qctx); errors.Is(cause, quota.ErrExceeded) {
		log.Warn("command stopped: workspace over its quota", "workspace", ws.Dir())
		return out, fmt.Errorf("the command was stopped: %w", cause)
	}
	note, qerr := r.quota.AfterCommand(ws.Dir(), ws.Root())
	if qerr != nil {
		log.Warn("measure workspace after exec", "err", qerr)
	}
	if note != "" {
		log.Warn("workspace over its quota after exec", "workspace", ws.Dir(), "note", note)
		out.Text += "\n\n" + note
	}
	return out, err
}

// writeEstimate is what a file tool call may add to its workspace: at
// most its arguments' size, and a file unless it edits one in place.
func writeEstimate(name string, tr *nanofleetv1.ToolRequest) quota.Usage {
	u := quota.Usage{Bytes: int64(len(tr.GetArgumentsJson())), Files: 1}
	if name == "edit_file" {
		u.Files = 0
	}
	return u
}

// execTool is the tool whose writes cannot be known before it runs.
const execTool = "exec"

// quotaTTL is how long a workspace's measured usage is trusted between
// commands (other runners and sessions may write to it meanwhile).
const quotaTTL = 10 * time.Second

// shrink stores an oversize result and replaces it by a preview.
func (r *Runner) shrink(ctx context.Context, name string, tr *nanofleetv1.ToolRequest, res *nanofleetv1.ToolResult) *nanofleetv1.ToolResult {
	if name == "read_tool_output" || utf8.RuneCountInString(res.Content) <= r.cfg.Runner.OversizeChars {
		return res
	}
	// The call's own deadline may have passed (a timed-out exec);
	// storing gets a moment of its own.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ref, err := output.Store(sctx, r.blobs, tr.GetSessionKey(), res.Content)
	if err != nil {
		r.log.Warn("oversize result not stored; cutting it", "tool", name, "err", err)
		res.Content = string([]rune(res.Content)[:r.cfg.Runner.OversizeChars]) + "\n\n[output cut: it was too long and could not be stored]"
		return res
	}
	res.Content = output.Preview(res.Content, ref, r.cfg.Runner.PreviewChars)
	res.FullObject = ref
	return res
}

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
