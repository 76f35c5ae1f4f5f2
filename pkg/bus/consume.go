package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// replyTimeout bounds the handling of one reply. It outlives the consumer's
// ctx so that a reply in hand is finished rather than left to redelivery.
const replyTimeout = 10 * time.Second

// ReplyHandler handles one decoded reply and acks, naks or terminates m.
type ReplyHandler func(ctx context.Context, m jetstream.Msg, out *nanofleetv1.OutboundMessage)

// ConsumeOutbound hands every reply published to an internal channel (one
// no gateway serves, such as "heartbeat" or "subagent") to handle, decoded,
// through the durable consumer named durable shared by every instance,
// until ctx ends. A reply that does not decode never reaches handle: it is
// dead-lettered with the reason and terminated.
func (b *Bus) ConsumeOutbound(ctx context.Context, durable, description, channel string, handle ReplyHandler, log *slog.Logger) error {
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
	cc, err := cons.Consume(func(m jetstream.Msg) {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), replyTimeout)
		defer cancel()
		out := &nanofleetv1.OutboundMessage{}
		if err := proto.Unmarshal(m.Data(), out); err != nil {
			b.deadLetterReply(mctx, m, fmt.Sprintf("decode outbound message: %v", err), log)
			return
		}
		handle(mctx, m, out)
	},
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

// deadLetterReply stores m on the outbound dead-letter subject with reason
// and terminates it; if the dead letter cannot be stored, m comes back
// later so that it is not lost.
func (b *Bus) deadLetterReply(ctx context.Context, m jetstream.Msg, reason string, log *slog.Logger) {
	if err := b.DeadLetter(ctx, "outbound", LetterOf(m, reason)); err != nil {
		log.Error("dead-letter reply", "subject", m.Subject(), "err", err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	log.Warn("reply dead-lettered", "subject", m.Subject(), "reason", reason)
	_ = m.Term()
}
