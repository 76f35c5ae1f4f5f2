// Command memory-consolidator condenses old conversation turns into
// long-term memory, runs Dream on its schedule and keeps the workspace's
// memory files in sync with JetStream. Run as many as the load needs.
package main

import (
	"context"
	"flag"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/memoryconsolidator"
)

func main() {
	var flags svc.Flags
	flags.Register(flag.CommandLine)
	id := flag.String("id", "", "consolidator id, unique among running ones (default host-pid)")
	workspace := flag.String("workspace", "", "workspace whose MEMORY.md, SOUL.md and USER.md are synced (empty: no sync)")
	flag.Parse()
	svc.Main(flags, service(*id, *workspace))
}

// service is the consolidator id, syncing workspace unless it is empty.
func service(id, workspace string) svc.Service {
	return svc.Service{Name: "memory-consolidator", Assets: []bus.Declare{memoryconsolidator.Assets}, Metrics: true,
		Start: func(ctx context.Context, env svc.Env) (func(context.Context) error, error) {
			s, err := memoryconsolidator.New(ctx, env.File, memoryconsolidator.Deps{
				Bus: env.Bus, ID: id, Workspace: workspace, Metrics: env.Metrics,
			}, memoryconsolidator.WithLogger(env.Log))
			if err != nil {
				return nil, err
			}
			return s.Run, nil
		}}
}
