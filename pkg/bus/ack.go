package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
)

// ackBody is what an ack sends (nats.go's jetstream.AckAck).
var ackBody = []byte("+ACK")

// Ack acks m at once, as a request on nc, and returns confirm, which
// waits for the server's answer and sends the ack again while it fails
// for a [Transient] reason (each try [RequestTry], within [CallTimeout]),
// until ctx ends. A plain ack is a publish nobody confirms: one sent as the
// node leading the consumer handed its leadership over (a lame-duck
// restart) was lost, and the message came again only after its ack wait.
// The ack goes out before confirm is called, so a caller that must not wait
// for the answer (a worker holding a session) calls confirm later.
// confirm is called once; it returns nil once the server has the ack.
func Ack(ctx context.Context, nc *nats.Conn, m jetstream.Msg) (confirm func(context.Context) error) {
	if m.Reply() == "" {
		return func(context.Context) error { return jetstream.ErrMsgNoReply }
	}
	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RequestTry)
		defer cancel()
		_, err := nc.RequestWithContext(ctx, m.Reply(), ackBody)
		first <- err
	}()
	return func(ctx context.Context) error {
		var err error
		select {
		case err = <-first:
		case <-ctx.Done():
			return fmt.Errorf("ack: %w", ctx.Err())
		}
		if err == nil {
			return nil
		}
		if Transient(err) {
			err = answered(ctx, nc, m, ackBody, CallTimeout)
		}
		if err != nil {
			return fmt.Errorf("ack: %w", err)
		}
		return nil
	}
}

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
	if err := answered(ctx, nc, m, body, LeaderWait); err != nil {
		return fmt.Errorf("nak: %w", err)
	}
	return nil
}

// answered sends body to m's reply subject as a request until the server
// answers, again while the failure is [Transient], each try bounded by
// [RequestTry], for up to within.
func answered(ctx context.Context, nc *nats.Conn, m jetstream.Msg, body []byte, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	return RetryEach(ctx, backoff.Backoff{Min: 250 * time.Millisecond, Max: 250 * time.Millisecond}, RequestTry, func(ctx context.Context) error {
		_, err := nc.RequestWithContext(ctx, m.Reply(), body)
		return err
	}, nil)
}
