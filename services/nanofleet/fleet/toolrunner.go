package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/pkg/toolclient"
	"github.com/nanofleet/nanofleet/services/agent-worker/worker"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
)

// startToolRunner starts the tool runner on the workspace and returns the
// client workers call it with.
func (f *Fleet) startToolRunner(setupCtx context.Context, o Options) (worker.RemoteTools, error) {
	cfg, err := runner.FromFile(o.File, o.Workspace)
	if err != nil {
		return nil, err
	}
	if msg := runner.SharedDiskWarning(cfg.Workspace, o.DataDir); msg != "" && o.DataDir != "" {
		f.log.Warn(msg)
	}
	ropts := []runner.Option{runner.WithLogger(f.log.With("service", "tool-runner")), runner.WithStopGrace(10 * time.Second)}
	if f.Storage != nil {
		// Tools leave free what the guard needs to count the store as
		// recovered, so that a session never fills the store's disk.
		ropts = append(ropts, runner.WithStoreDisk(f.Storage.Dir(), 2*f.Storage.MinFree()))
	}
	r, err := runner.New(cfg, f.Bus, ropts...)
	if err != nil {
		return nil, err
	}
	// The runner outlives the fleet's run context: turns finishing after Stop
	// cancelled it still call tools, so it stops in its closer, after the workers.
	stop, err := svc.Background(setupCtx, r.Run, r.Serving())
	if err != nil {
		return nil, fmt.Errorf("start tool-runner: %w", err)
	}
	f.closer = append(f.closer, func() {
		if err := stop(); err != nil {
			f.log.Warn("tool-runner stopped", "err", err)
		}
	})
	opts := []toolclient.Option{toolclient.WithLogger(f.log)}
	if f.Embedded != nil && !o.Listen {
		// No other process can reach this server: its one runner is all
		// there is, and the first turn need not wait out the catalog's
		// gathering window.
		opts = append(opts, toolclient.WithAllRunners(1))
	}
	return toolclient.New(f.Bus, opts...)
}
