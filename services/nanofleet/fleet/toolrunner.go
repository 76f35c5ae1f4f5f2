package fleet

import (
	"context"
	"time"

	"github.com/nanofleet/nanofleet/pkg/toolclient"
	"github.com/nanofleet/nanofleet/services/agent-worker/worker"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
)

// startToolRunner starts the tool runner on the workspace and returns the
// client workers call it with.
func (f *Fleet) startToolRunner(setupCtx, runCtx context.Context, o Options) (worker.RemoteTools, error) {
	cfg, err := runner.FromFile(o.File, o.Workspace)
	if err != nil {
		return nil, err
	}
	if msg := runner.SharedDiskWarning(cfg.Workspace, o.DataDir); msg != "" && o.DataDir != "" {
		o.Log.Warn(msg)
	}
	r, err := runner.New(cfg, f.Bus, runner.WithLogger(o.Log.With("service", "tool-runner")))
	if err != nil {
		return nil, err
	}
	if err := r.Start(setupCtx); err != nil {
		return nil, err
	}
	f.closer = append(f.closer, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Stop(ctx)
	})
	opts := []toolclient.Option{toolclient.WithLogger(o.Log)}
	if f.Embedded != nil && !o.Listen {
		// No other process can reach this server: its one runner is all
		// there is, and the first turn need not wait out the catalog's
		// gathering window.
		opts = append(opts, toolclient.WithAllRunners(1))
	}
	return toolclient.New(f.Bus, opts...)
}
