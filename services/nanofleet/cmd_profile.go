package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/profile"
)

// profileCmd is how an operator changes the agent's profile when sessions
// may not (tools.workspace.editableProfile off): review the workspace's
// bootstrap files and skills, then copy them into the running fleet.
func profileCmd(ctx context.Context, env *environment, args []string) error {
	var c common
	set := &commandSet{
		name:    "profile",
		summary: "Change the agent's profile (its bootstrap files and skills) from the workspace, where sessions may not change it.",
		flags:   func(fs *flag.FlagSet) { env.registerClient(fs, &c) },
		subs: []subcommand{
			{name: "seed", synopsis: "[--workspace DIR]",
				summary: "copy the workspace's bootstrap files and skills into the fleet's profile; review them first, sessions can write the workspace",
				flags: func(fs *flag.FlagSet) {
					fs.StringVar(&c.workspace, "workspace", "", "the workspace `directory` to copy from (default from config: agents.defaults.workspace)")
				},
				run: func([]string) error {
					return env.withFleet(ctx, &c, func(b *bus.Bus) error {
						return seedProfile(ctx, b, c.workspace, env.stdout, env.logger(slog.LevelWarn))
					})
				}},
		},
	}
	return set.run(env.stdout, args)
}

// seedProfile copies the workspace's profile files into the bucket, as
// the first start does; symlinks and hard links are still not followed.
func seedProfile(ctx context.Context, b *bus.Bus, workspace string, out io.Writer, log *slog.Logger) error {
	kv, err := b.KV(ctx, bus.BucketProfile)
	if err != nil {
		return err
	}
	n, err := profile.Seed(ctx, kv, profile.DefaultAgent, workspace, profile.WithEditable(true), profile.WithLogger(log))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "profile: %d file(s) copied from %s\n", n, workspace)
	return nil
}
