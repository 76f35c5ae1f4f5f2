package main

import (
	"context"
	"flag"

	"github.com/nanofleet/nanofleet/pkg/schedule"
)

func cronCmd(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("cron", flag.ContinueOnError)
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
	return schedule.RunCLI(ctx, b, fs.Args(), env.stdout)
}
