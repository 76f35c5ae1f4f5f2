package main

import (
	"context"
	"flag"

	"github.com/nanofleet/nanofleet/pkg/memory/memcli"
)

func memoryCmd(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("memory", flag.ContinueOnError)
	var c common
	env.register(fs, &c)
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := env.connect(ctx, &c)
	if err != nil {
		return err
	}
	defer b.Close()
	return memcli.Run(ctx, b, fs.Args(), env.stdout)
}
