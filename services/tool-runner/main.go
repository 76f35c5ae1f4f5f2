// Command tool-runner serves the fleet's file, exec, web and MCP tools over
// NATS, confined to workspaces; see package runner. Run as many as the load
// needs: calls are load-balanced over a queue group.
package main

import (
	"context"
	"flag"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
)

func main() {
	var flags svc.Flags
	flags.Register(flag.CommandLine)
	workspace := flag.String("workspace", "", "workspace root (overrides tools.workspace.root)")
	flag.Parse()
	svc.Main(flags, service(*workspace))
}

// service is the runner of workspace (empty: tools.workspace.root).
func service(workspace string) svc.Service {
	return svc.Service{Name: "tool-runner", Start: func(ctx context.Context, env svc.Env) (func(context.Context) error, error) {
		cfg, err := runner.FromFile(env.File, workspace)
		if err != nil {
			return nil, err
		}
		// The runners hold the workspace, so they seed the agent profile
		// (bootstrap files, skills) that workers read from JetStream.
		if err := seed(ctx, env, cfg.Workspace); err != nil {
			return nil, err
		}
		r, err := runner.New(cfg, env.Bus, runner.WithLogger(env.Log))
		if err != nil {
			return nil, err
		}
		return r.Run, nil
	}}
}

// seed copies the workspace's profile files into the profile bucket. Only
// a transient failure is returned (to retry); others are logged.
func seed(ctx context.Context, env svc.Env, ws runner.WorkspaceConfig) error {
	kv, err := env.Bus.KV(ctx, bus.BucketProfile)
	if err != nil {
		return err
	}
	n, err := profile.Seed(ctx, kv, profile.DefaultAgent, ws.Root, profile.WithEditable(ws.EditableProfile), profile.WithLogger(env.Log))
	if err != nil && !bus.Transient(err) {
		env.Log.Warn("seed agent profile from workspace", "err", err)
		return nil
	}
	if n > 0 {
		env.Log.Info("agent profile seeded from workspace", "entries", n)
	}
	return err
}
