package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/fleetdir"
	"github.com/nanofleet/nanofleet/pkg/memtrim"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

func runCmd(ctx context.Context, env *environment, args []string) error {
	var c common
	var (
		workers          int
		httpAddr, listen string
		noGateway        bool
		httpGiven        bool
	)
	line := &cmd{name: "run", summary: "Run the whole fleet in this process, around an embedded NATS server unless --nats.",
		flags: func(fs *flag.FlagSet) {
			env.register(fs, &c)
			fs.IntVar(&workers, "workers", 1, "agent workers in this process")
			fs.Func("http", "observability `address` (/metrics, /healthz, /readyz); empty disables (default: observability.listen, else 127.0.0.1:9090)",
				func(s string) error { httpAddr, httpGiven = s, true; return nil })
			fs.BoolVar(&noGateway, "no-gateway", false, "do not run the channel-gateway")
			fs.StringVar(&listen, "listen", "", "web chat, dashboard and OpenAI-compatible API `address` (default: channels.web.listen, else 127.0.0.1:8080)")
		}}
	if _, err := line.parse(env.stdout, args); err != nil {
		return err
	}
	file, err := env.load(&c)
	if err != nil {
		return err
	}
	// The config says where each listener is; a flag given overrides it.
	if !httpGiven {
		httpAddr = cmp.Or(file.Observability.Listen, "127.0.0.1:9090")
	}
	log := env.logger(c.logLevel)
	opts := fleet.Options{
		File: file, Getenv: env.getenv, DataDir: c.dataDir, Workspace: c.workspace,
		Listen: true, Workers: workers, Gateway: !noGateway, GatewayListen: listen,
		Announce: func(line string) { fmt.Fprintln(env.stderr, line) },
	}
	var lock *fleetdir.Lock
	if file.NATS.URL == "" {
		// The embedded server's store is this process's alone.
		if lock, opts.Credentials, err = lockDataDir(c.dataDir, "run"); err != nil {
			return err
		}
		defer lock.Release()
	}
	// The metrics server listens first: a taken port then stops the
	// start before anything else runs or is announced; /readyz says
	// "starting" until the fleet runs.
	opts.Registry = observe.NewRegistry()
	var ready svc.Readiness
	stopHTTP, err := svc.Observability(ctx, httpAddr, opts.Registry, ready.Check)
	if err != nil {
		return err
	}
	defer stopHTTP()
	f, err := fleet.Start(ctx, opts, fleet.WithLogger(log))
	if err != nil {
		return err
	}
	if lock != nil {
		info := fleetdir.Info{PID: os.Getpid(), Command: "run", NATSURL: f.Embedded.ClientURL(), Started: time.Now().UTC()}
		if err := lock.Publish(info); err != nil {
			f.Stop()
			return err
		}
	}
	ready.Ready(f.Ready)
	// Give the memory of a burst back once the process goes quiet.
	go memtrim.Run(ctx, memtrim.DefaultConfig())
	if httpAddr != "" {
		fmt.Fprintf(env.stderr, "metrics: http://%s/metrics (also /healthz, /readyz)\n", httpAddr)
	}
	if f.Embedded != nil {
		fmt.Fprintf(env.stderr, "NATS: %s (user and password in %s; other nanofleet commands on this machine find them)\n",
			f.Embedded.ClientURL(), filepath.Join(c.dataDir, "nats-credentials.json"))
	} else {
		fmt.Fprintf(env.stderr, "NATS: %s\n", redactURL(file.NATS.URL))
	}
	fmt.Fprintf(env.stderr, "nanofleet is running (%d worker(s), model %s, workspace %s). Ctrl-C stops it.\n", workers, file.Agents.Defaults.Model, c.workspace)
	select {
	case <-ctx.Done():
	case <-f.Done():
	}
	fmt.Fprintln(env.stderr, "nanofleet: stopping; running turns finish first (Ctrl-C again stops now; they resume at the next start)")
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-env.stopNow:
			fmt.Fprintln(env.stderr, "nanofleet: stopping now; the running turns are handed back and taken again at the next start")
			f.StopTurns()
		case <-stopped:
		}
	}()
	f.Stop()
	return f.Err()
}

// redactURL drops the passwords of NATS URLs (comma separated) for printing.
func redactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// lockDataDir takes the data directory for command's embedded server and
// returns its credentials. fleet.json says who holds it until the server
// says where it listens.
func lockDataDir(dir, command string) (*fleetdir.Lock, fleetdir.Credentials, error) {
	lock, err := fleetdir.Acquire(dir)
	if err != nil {
		return nil, fleetdir.Credentials{}, err
	}
	creds, err := lock.Credentials()
	if err == nil {
		err = lock.Publish(fleetdir.Info{PID: os.Getpid(), Command: command, Started: time.Now().UTC()})
	}
	if err != nil {
		lock.Release()
		return nil, fleetdir.Credentials{}, err
	}
	return lock, creds, nil
}
