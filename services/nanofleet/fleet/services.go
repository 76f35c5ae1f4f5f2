package fleet

import (
	"context"
	"fmt"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/services/agent-worker/agentworker"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channelgateway"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/memoryconsolidator"
)

// startServices starts the parts in dependency order: tool runner, workers,
// consolidator, gateway. setupCtx bounds start-up; runCtx lives until Stop.
func (f *Fleet) startServices(setupCtx, runCtx context.Context, o Options, node string) error {
	tools, err := f.startToolRunner(setupCtx, o)
	if err != nil {
		return err
	}
	// With an external NATS, a cluster electing leaders is retried
	// through, within setupCtx.
	for i := range o.Workers {
		var w *agentworker.Worker
		err := svc.Retry(setupCtx, f.log, nil, "start agent worker", func(ctx context.Context) (err error) {
			w, err = agentworker.New(ctx, o.File, agentworker.Deps{
				Bus: f.Bus, Getenv: o.Getenv, ID: fmt.Sprintf("%s-%d", node, i), Workspace: o.Workspace,
				Tools: tools, Metrics: f.Metrics,
			}, agentworker.WithLogger(f.log))
			return err
		})
		if err != nil {
			return err
		}
		f.closer = append(f.closer, w.Close)
		f.workers = append(f.workers, w)
		f.goRun(runCtx, "agent-worker", w.Run)
	}
	// The consolidator on a connection of its own, as in its own process:
	// on the workers' it fell behind their turns (see dial).
	var memBus *bus.Bus
	err = svc.Retry(setupCtx, f.log, nil, "connect memory-consolidator", func(ctx context.Context) (err error) {
		memBus, err = f.dial(ctx, o, "nanofleet-memory-consolidator")
		return err
	})
	if err != nil {
		return err
	}
	var mem *memoryconsolidator.Service
	err = svc.Retry(setupCtx, f.log, nil, "start memory-consolidator", func(ctx context.Context) (err error) {
		mem, err = memoryconsolidator.New(ctx, o.File, memoryconsolidator.Deps{
			Bus: memBus, Getenv: o.Getenv, ID: node + "-memory", Workspace: o.Workspace, Metrics: f.Metrics,
		}, memoryconsolidator.WithLogger(f.log.With("service", "memory-consolidator")))
		return err
	})
	if err != nil {
		return err
	}
	f.goRun(runCtx, "memory-consolidator", mem.Run)
	if o.Gateway {
		var gw *channelgateway.Gateway
		err := svc.Retry(setupCtx, f.log, nil, "start channel-gateway", func(ctx context.Context) (err error) {
			gw, err = channelgateway.New(ctx, o.File, channelgateway.Deps{
				Bus: f.Bus, Listen: o.GatewayListen, DefaultListen: "127.0.0.1:8080", Metrics: f.Metrics, Announce: o.Announce,
				Storage: f.storageErr,
			}, channelgateway.WithLogger(f.log.With("service", "channel-gateway")))
			return err
		})
		if err != nil {
			return err
		}
		f.goRun(runCtx, "channel-gateway", gw.Run)
	}
	return nil
}
