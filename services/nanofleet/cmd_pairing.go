package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
)

func pairingCmd(ctx context.Context, env *environment, args []string) error {
	var c common
	set := &commandSet{
		name:    "pairing",
		summary: "Let a sender talk to the bot in direct messages: the bot answers an unknown sender with a pairing code to approve here.",
		flags:   func(fs *flag.FlagSet) { env.registerClient(fs, &c) },
		subs: []subcommand{
			{name: "approve", synopsis: "CODE", summary: "approve the sender a pairing code was given to", minArgs: 1, maxArgs: 1,
				run: func(args []string) error {
					return env.withFleet(ctx, &c, func(b *bus.Bus) error {
						if err := access.Approve(ctx, b, args[0]); err != nil {
							return err
						}
						fmt.Fprintf(env.stdout, "approved pairing code %s\n", args[0])
						return nil
					})
				}},
		},
	}
	return set.run(env.stdout, args)
}
