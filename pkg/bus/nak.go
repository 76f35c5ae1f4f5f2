package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
)

// NakWithDelay is m.NakWithDelay confirmed by the server. A nak is a
// plain publish that nobody receives while the consumer has no leader
// (the node leading it died, and the other replicas are electing
// another), or that is lost with the connection (its node's lame-duck
// restart): the message then waited its whole ack wait instead of delay,
// and a message put back to wait for its session held the session's
// later ones behind it. This sends the nak as a request on nc and sends
// it again ([RetryEach]) while the failure is [Transient], each try
// bounded by [RequestTry], for up to [LeaderWait]. Answered at once
// otherwise: one round trip.
func NakWithDelay(ctx context.Context, nc *nats.Conn, m jetstream.Msg, delay time.Duration) error {
	if m.Reply() == "" {
		return jetstream.ErrMsgNoReply
	}
	body := fmt.Appendf(nil, "-NAK {\"delay\": %d}", delay.Nanoseconds())
	ctx, cancel := context.WithTimeout(ctx, LeaderWait)
	defer cancel()
	err := RetryEach(ctx, backoff.Backoff{Min: 250 * time.Millisecond, Max: 250 * time.Millisecond}, RequestTry, func(ctx context.Context) error {
		_, err := nc.RequestWithContext(ctx, m.Reply(), body)
		return err
	}, nil)
	if err != nil {
		return fmt.Errorf("nak: %w", err)
	}
	return nil
}
