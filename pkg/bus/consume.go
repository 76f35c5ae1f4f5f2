package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ConsumeOutbound hands every reply published to an internal channel (one
// no gateway serves, such as "heartbeat" or "subagent") to handle, through
// the durable consumer named durable shared by every instance, until ctx
// ends. handle acks, naks or terminates each message itself.
func (b *Bus) ConsumeOutbound(ctx context.Context, durable, description, channel string, handle func(jetstream.Msg), log *slog.Logger) error {
	cons, err := b.JS.CreateOrUpdateConsumer(ctx, b.Space.OutboundStream(), jetstream.ConsumerConfig{
		Durable:       durable,
		Description:   description,
		FilterSubject: b.Space.OutboundChannel(channel),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("consumer %s: %w", durable, err)
	}
	cc, err := cons.Consume(handle,
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if ctx.Err() == nil && !errors.Is(err, jetstream.ErrNoHeartbeat) {
				log.Debug("consume outbound", "consumer", durable, "err", err)
			}
		}))
	if err != nil {
		return fmt.Errorf("consume %s: %w", durable, err)
	}
	<-ctx.Done()
	cc.Drain()
	<-cc.Closed()
	return nil
}
