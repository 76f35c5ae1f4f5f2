// Command channel-gateway connects chat platforms, the web chat and the
// OpenAI-compatible API to a nanofleet over NATS.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nanofleet/nanofleet/pkg/memtrim"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channelgateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
)

func main() {
	var flags svc.Flags
	flags.Register(flag.CommandLine)
	listen := flag.String("listen", "", "web chat, API and webhook address (default: channels.web.listen, else :8080)")
	flag.Parse()
	if err := run(flags, *listen); err != nil {
		flags.Logger("channel-gateway").Error("channel-gateway failed", "err", err)
		fmt.Fprintln(os.Stderr, "channel-gateway:", err)
		os.Exit(1)
	}
}

func run(flags svc.Flags, listen string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := flags.Logger("channel-gateway")
	file, err := flags.LoadConfig()
	if err != nil {
		return err
	}
	reg := observe.NewRegistry()
	metrics := observe.NewMetrics(reg)
	// /readyz says why while NATS is not there yet.
	var ready svc.Readiness
	stopHTTP, err := svc.Observability(ctx, flags.HTTP, reg, ready.Check)
	if err != nil {
		return err
	}
	defer stopHTTP()
	b, err := svc.Connect(ctx, file, "channel-gateway", log, &ready, channels.Assets)
	if err != nil {
		return err
	}
	defer b.Close()
	var g *channelgateway.Gateway
	err = svc.Retry(ctx, log, &ready, "start channel-gateway", func(ctx context.Context) error {
		g, err = channelgateway.New(ctx, file, channelgateway.Deps{Bus: b, Listen: listen, Metrics: metrics}, channelgateway.WithLogger(log))
		return err
	})
	if err != nil {
		return err
	}
	// Give the memory of a burst back once the process goes quiet.
	go memtrim.Run(ctx, memtrim.DefaultConfig())
	ready.Ready(svc.BusReady(b))
	log.Info("channel-gateway running", "listen", g.Addr())
	return g.Run(ctx)
}
