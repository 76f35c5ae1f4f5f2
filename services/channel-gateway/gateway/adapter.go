package gateway

import (
	"context"
	"time"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Adapter connects one chat platform to the fleet.
type Adapter interface {
	// Channel is the channel name used in subjects and session keys,
	// e.g. "telegram".
	Channel() string
	// Run receives platform events until ctx ends, publishing each as an
	// inbound message through in. Access control happens before Publish.
	Run(ctx context.Context, in Inbox) error
	// Deliver sends one durable reply (final, error or message-tool kind).
	// It returns a *DeliveryError to ask for a retry or to give up.
	Deliver(ctx context.Context, msg *nanofleetv1.OutboundMessage) error
}

// LiveAdapter is an adapter that shows progress, tool hints or streaming
// deltas while a turn runs.
type LiveAdapter interface {
	Adapter
	DeliverLive(ctx context.Context, msg *nanofleetv1.OutboundMessage) error
}

// Inbox publishes inbound messages into the fleet.
type Inbox interface {
	Publish(ctx context.Context, msg *nanofleetv1.InboundMessage) error
}

// InboxFunc adapts a function to [Inbox].
type InboxFunc func(ctx context.Context, msg *nanofleetv1.InboundMessage) error

// Publish calls f.
func (f InboxFunc) Publish(ctx context.Context, msg *nanofleetv1.InboundMessage) error {
	return f(ctx, msg)
}

// PublishWithin publishes msg through in, trying a transient failure
// (NATS unreachable, a stream without a leader) again 200 ms to 2 s apart
// until within has passed: for an adapter whose platform will not send
// the message again soon (Slack's envelope is acknowledged before the
// message is stored; WhatsApp sends it again only at the next
// connection). failed, if not nil, is told of each failure and the wait
// before the next try.
func PublishWithin(ctx context.Context, in Inbox, msg *nanofleetv1.InboundMessage, within time.Duration, failed func(err error, wait time.Duration)) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	return bus.Retry(ctx, backoff.Backoff{Min: 200 * time.Millisecond, Max: 2 * time.Second}, func(ctx context.Context) error {
		return in.Publish(ctx, msg)
	}, failed)
}
