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
	"github.com/nanofleet/nanofleet/services/channel-gateway/service"
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
	b, err := svc.Connect(ctx, file, "channel-gateway", log)
	if err != nil {
		return err
	}
	defer b.Close()
	reg := observe.NewRegistry()
	g, err := service.New(ctx, b, file, service.Options{Listen: listen, Metrics: observe.NewMetrics(reg), Log: log})
	if err != nil {
		return err
	}
	// Give the memory of a burst back once the process goes quiet.
	go memtrim.Run(ctx, memtrim.DefaultConfig())
	stopHTTP, err := svc.Observability(ctx, flags.HTTP, reg, svc.BusReady(b))
	if err != nil {
		return err
	}
	defer stopHTTP()
	log.Info("channel-gateway running", "listen", g.Addr())
	return g.Run(ctx)
}
