package gateway

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// followLive subscribes la to its channel's live messages and flushes the
// subscription to the server, so that it is followed once followLive
// returns. A queue group: with several gateways, each live message is
// shown once, not once per gateway.
func (g *Gateway) followLive(ctx context.Context, channel string, la LiveAdapter) (unsubscribe func(), err error) {
	sub, err := g.bus.NC.QueueSubscribe(g.bus.Space.LiveChannel(channel), g.bus.Space.GatewayConsumer(channel), func(m *nats.Msg) {
		out := &nanofleetv1.OutboundMessage{}
		if err := proto.Unmarshal(m.Data, out); err != nil {
			g.log.Warn("drop malformed live message", "subject", m.Subject, "err", err)
			return
		}
		if err := la.DeliverLive(ctx, out); err != nil {
			g.log.Debug("live delivery failed", "channel", channel, "err", err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe live %s: %w", channel, err)
	}
	unsubscribe = func() { _ = sub.Unsubscribe() }
	if err := g.setUp(ctx, g.bus.NC.FlushWithContext); err != nil {
		unsubscribe()
		return nil, fmt.Errorf("subscribe live %s: %w", channel, err)
	}
	return unsubscribe, nil
}
