package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
)

func pairingCmd(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("pairing", flag.ContinueOnError)
	var c common
	env.register(fs, &c)
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) != 2 || rest[0] != "approve" {
		return errors.New("usage: nanofleet pairing approve CODE")
	}
	b, err := env.connect(ctx, &c)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := access.Approve(ctx, b, rest[1]); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "approved pairing code %s\n", rest[1])
	return nil
}
