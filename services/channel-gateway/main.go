// Command channel-gateway connects chat platforms, the web chat and the
// OpenAI-compatible API to a nanofleet over NATS.
package main

import (
	"context"
	"flag"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channelgateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
)

func main() {
	var flags svc.Flags
	flags.Register(flag.CommandLine)
	listen := flag.String("listen", "", "web chat, API and webhook address (default: channels.web.listen, else :8080)")
	flag.Parse()
	svc.Main(flags, svc.Service{Name: "channel-gateway", Assets: []bus.Declare{channels.Assets}, Metrics: true,
		Start: func(ctx context.Context, env svc.Env) (func(context.Context) error, error) {
			g, err := channelgateway.New(ctx, env.File, channelgateway.Deps{
				Bus: env.Bus, Listen: *listen, Metrics: env.Metrics,
			}, channelgateway.WithLogger(env.Log))
			if err != nil {
				return nil, err
			}
			if addr := g.Addr(); addr != nil { // nil: no web chat, API or webhook
				env.Log.Info("channel-gateway listening", "listen", addr.String())
			}
			return g.Run, nil
		}})
}
