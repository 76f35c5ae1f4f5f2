package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/toolclient"

	"github.com/nanofleet/nanofleet/services/tool-runner/mcp"
)

// Run serves tool calls until ctx ends. It opens the object store, probes
// the sandbox and registers the service's endpoints, retrying while NATS
// fails for a transient reason; a sandbox that cannot start is logged, not
// fatal: exec calls are then refused with the reason. [Runner.Serving] is
// closed once calls are taken. When ctx ends Run stops taking calls, lets
// running ones finish within the stop grace ([WithStopGrace]), cancels the
// rest (killing their commands), stops the MCP servers and returns.
func (r *Runner) Run(ctx context.Context) error {
	// The MCP servers run from the first attempt to start until the calls
	// have drained, across the attempts.
	stopMCP := r.runMCP(ctx)
	err := bus.RetryEach(ctx, backoff.Backoff{}, startTimeout, r.start, func(err error, wait time.Duration) {
		r.log.Warn("tool-runner cannot register yet; retrying", "err", err, "retry_in", wait)
	})
	if err != nil {
		return errors.Join(fmt.Errorf("start tool-runner: %w", err), stopMCP())
	}
	close(r.serving)
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.stopGrace)
	defer cancel()
	return errors.Join(r.stop(stopCtx), stopMCP())
}

// runMCP runs the MCP servers, if any, until the returned stop is called;
// stop returns once they have stopped (withdrawn, then ended).
func (r *Runner) runMCP(ctx context.Context) (stop func() error) {
	if r.mcp == nil {
		return func() error { return nil }
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ran := make(chan error, 1)
	go func() { ran <- r.mcp.Run(ctx) }()
	return func() error {
		cancel()
		return <-ran
	}
}

// Serving is closed once [Runner.Run] takes calls.
func (r *Runner) Serving() <-chan struct{} { return r.serving }

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
	r.blobs = boundedBlobs{blobs}
	if err := r.prepareRoot(); err != nil {
		return fmt.Errorf("tools.workspace.root: %w", err)
	}
	if err := r.exec.Probe(ctx); err != nil {
		r.log.Warn("exec will be refused until the sandbox works", "err", err)
	} else if err := r.checkRootReachable(); err != nil {
		r.log.Warn("exec will fail in workspaces under this root", "err", err)
	}
	if r.mcp != nil {
		// Slow servers join when they are ready.
		select {
		case <-r.mcp.Started():
		case <-ctx.Done():
		}
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
		micro.WithEndpointSubject(r.bus.Space.ToolCatalog()),
		micro.WithEndpointQueueGroupDisabled()); err != nil {
		svc.Stop()
		r.cancel()
		return fmt.Errorf("catalog endpoint: %w", err)
	}
	// The subscriptions are in place once the server has them. A flush
	// cut short by a lost connection is sent again once it is back (the
	// subscriptions with it).
	fctx, fcancel := context.WithTimeout(ctx, bus.CallTimeout)
	defer fcancel()
	if err := bus.Retry(fctx, backoff.Backoff{}, func(ctx context.Context) error { return bus.Flush(ctx, r.bus.NC) }, nil); err != nil {
		svc.Stop()
		r.cancel()
		return fmt.Errorf("register tool-runner service: %w", err)
	}
	r.svc = svc
	r.started = true
	var mcpTools []string
	if r.mcp != nil {
		r.mcp.Serve(ctx, &mcp.MicroPublisher{NC: r.bus.NC, Service: svcCfg, Subject: r.bus.Space.ToolCall,
			Handler: func(name string) micro.Handler { return micro.HandlerFunc(r.serve(name)) }})
		mcpTools = r.mcp.Names()
	}
	r.log.Info("tool-runner serving", "tools", r.set.Names(), "mcpTools", mcpTools, "sandbox", r.exec.Mode(), "workspaces", r.cfg.Workspace.Root, "perSession", r.cfg.Workspace.PerSession)
	return nil
}

// stop stops taking calls and waits for running ones until ctx ends; then
// it cancels them (killing their commands), waits for them at most
// [abandonWait] more and returns ctx's error. The MCP servers stop after
// it (Run).
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
		err = errors.Join(err, ctx.Err())
		select {
		case <-done:
		case <-time.After(abandonWait):
			// A call that ignores its cancellation (a system call that
			// does not return) must not keep the runner from stopping.
			r.log.Error("stopping: calls still running after their cancellation; left behind", "waited", abandonWait)
			err = errors.Join(err, errCallsLeft)
		}
	}
	r.cancel()
	return err
}

// abandonWait is how long a stop waits for cancelled calls to return.
// Cancelling kills a command's process group and ends file and web calls
// at once; one that has not returned by then will not.
const abandonWait = 5 * time.Second

// errCallsLeft: the stop returned with calls still running.
var errCallsLeft = errors.New("tool calls still running after their cancellation")
