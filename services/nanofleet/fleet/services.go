package fleet

import (
	"context"
	"fmt"

	"github.com/nanofleet/nanofleet/services/agent-worker/service"
	gatewaysvc "github.com/nanofleet/nanofleet/services/channel-gateway/service"
	consolidator "github.com/nanofleet/nanofleet/services/memory-consolidator/service"
)

// startServices starts the parts in dependency order: tool runner, workers,
// consolidator, gateway. setupCtx bounds start-up; runCtx lives until Stop.
func (f *Fleet) startServices(setupCtx, runCtx context.Context, o Options, node string) error {
	tools, err := f.startToolRunner(setupCtx, runCtx, o)
	if err != nil {
		return err
	}
	for i := range o.Workers {
		w, err := service.New(setupCtx, f.Bus, service.Options{
			File: o.File, Getenv: o.Getenv, ID: fmt.Sprintf("%s-%d", node, i), Workspace: o.Workspace,
			Tools: tools, Metrics: f.Metrics, Log: o.Log,
		})
		if err != nil {
			return fmt.Errorf("agent worker: %w", err)
		}
		f.closer = append(f.closer, w.Close)
		f.goRun("agent-worker", func() error { return w.Run(runCtx) })
	}
	// The workers provisioned the memory streams when they opened memory.
	mem, err := consolidator.New(setupCtx, f.Bus, consolidator.Options{
		File: o.File, Getenv: o.Getenv, ID: node + "-memory", Workspace: o.Workspace,
		Metrics: f.Metrics, Log: o.Log.With("service", "memory-consolidator"),
	})
	if err != nil {
		return fmt.Errorf("memory-consolidator: %w", err)
	}
	f.goRun("memory-consolidator", func() error { return mem.Run(runCtx) })
	if o.Gateway {
		gw, err := gatewaysvc.New(setupCtx, f.Bus, o.File, gatewaysvc.Options{
			Listen: o.GatewayListen, DefaultListen: "127.0.0.1:8080", Metrics: f.Metrics, Log: o.Log.With("service", "channel-gateway"), Announce: o.Announce,
			Storage: f.storageErr,
		})
		if err != nil {
			return fmt.Errorf("channel-gateway: %w", err)
		}
		f.goRun("channel-gateway", func() error { return gw.Run(runCtx) })
	}
	return nil
}
