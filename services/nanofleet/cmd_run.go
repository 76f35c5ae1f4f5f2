package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/nanofleet/nanofleet/pkg/memtrim"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

func runCmd(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var c common
	env.register(fs, &c)
	workers := fs.Int("workers", 1, "agent workers in this process")
	httpAddr := fs.String("http", "127.0.0.1:9090", "observability address (/metrics, /healthz, /readyz); empty disables")
	noGateway := fs.Bool("no-gateway", false, "do not run the channel-gateway")
	listen := fs.String("listen", "127.0.0.1:8080", "web chat and OpenAI-compatible API address (\"\" for channels.web.listen)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	file, err := env.load(&c)
	if err != nil {
		return err
	}
	log := env.logger(c.logLevel)
	f, err := fleet.Start(ctx, fleet.Options{
		File: file, Getenv: env.getenv, Log: log, DataDir: c.dataDir, Workspace: c.workspace,
		Listen: true, Workers: *workers, Gateway: !*noGateway, GatewayListen: *listen,
		Announce: func(line string) { fmt.Fprintln(env.stderr, line) },
	})
	if err != nil {
		return err
	}
	// Give the memory of a burst back once the process goes quiet.
	go memtrim.Run(ctx, memtrim.DefaultConfig())
	stopHTTP, err := svc.Observability(ctx, *httpAddr, f.Registry, f.Ready)
	if err != nil {
		f.Stop()
		return err
	}
	where := "embedded NATS"
	if f.Embedded != nil && f.Embedded.ClientURL() != "" {
		where = "embedded NATS at " + f.Embedded.ClientURL()
	} else if file.NATS.URL != "" {
		where = "NATS at " + file.NATS.URL
	}
	fmt.Fprintf(env.stderr, "nanofleet is running (%s, %d worker(s), workspace %s). Ctrl-C stops it.\n", where, *workers, c.workspace)
	select {
	case <-ctx.Done():
	case <-f.Done():
	}
	fmt.Fprintln(env.stderr, "nanofleet: stopping; running turns finish first")
	stopHTTP()
	f.Stop()
	return f.Err()
}
