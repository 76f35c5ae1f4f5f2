// Command agent-worker runs agent workers: it takes inbound messages from
// JetStream and turns each into one committed turn. Run as many as the load
// needs; they share the work and survive each other's crashes.
package main

import (
	"context"
	"flag"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/pkg/toolclient"
	"github.com/nanofleet/nanofleet/services/agent-worker/agentworker"
)

func main() {
	var flags svc.Flags
	flags.Register(flag.CommandLine)
	id := flag.String("id", "", "worker id, unique among running workers (default host-pid)")
	workspace := flag.String("workspace", "/workspace", "workspace path as the tool runners see it")
	flag.Parse()
	svc.Main(flags, service(*id, *workspace))
}

// service is the worker id, with workspace the path the tool runners see.
func service(id, workspace string) svc.Service {
	return svc.Service{Name: "agent-worker", Assets: []bus.Declare{agentworker.Assets}, Metrics: true,
		Start: func(ctx context.Context, env svc.Env) (func(context.Context) error, error) {
			tools, err := toolclient.New(env.Bus, toolclient.WithLogger(env.Log))
			if err != nil {
				return nil, err
			}
			w, err := agentworker.New(ctx, env.File, agentworker.Deps{
				Bus: env.Bus, ID: id, Workspace: workspace, Tools: tools, Metrics: env.Metrics,
			}, agentworker.WithLogger(env.Log))
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				defer w.Close()
				return w.Run(ctx)
			}, nil
		}}
}
