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
	ack := func(ctx context.Context) error {
		_, err := nc.RequestWithContext(ctx, m.Reply(), ackBody)
		return err
	}
	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RequestTry)
		defer cancel()
		first <- ack(ctx)
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
			ctx, cancel := context.WithTimeout(ctx, CallTimeout)
			defer cancel()
			err = RetryEach(ctx, backoff.Backoff{Min: 250 * time.Millisecond, Max: 250 * time.Millisecond}, RequestTry, ack, nil)
		}
		if err != nil {
			return fmt.Errorf("ack: %w", err)
		}
		return nil
	}
}
