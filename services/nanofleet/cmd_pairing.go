package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
)

func pairingCmd(ctx context.Context, env *environment, args []string) error {
	check := argsAre("approve", 2, "usage: nanofleet pairing approve CODE")
	return env.joinFleet(ctx, flag.NewFlagSet("pairing", flag.ContinueOnError), args, check, func(b *bus.Bus, _ *common, rest []string) error {
		if err := access.Approve(ctx, b, rest[1]); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "approved pairing code %s\n", rest[1])
		return nil
	})
}
