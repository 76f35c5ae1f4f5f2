package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
)

// pendingSweep is how long RedeliverPending leaves a consumer at its short
// ack wait: nats-server reviews a consumer's pending deliveries 100 ms
// after its ack wait changes (consumer.go, updateConfig), and queues the
// expired ones for redelivery. The rest is margin for a timer that fires
// late on a loaded machine; it is spent only when work is pending.
const pendingSweep = 500 * time.Millisecond

// Redelivery is one consumer whose pending deliveries RedeliverPending
// queued again.
type Redelivery struct {
	Stream, Consumer string
	// Messages is how many deliveries it had pending.
	Messages int
}

// RedeliverPending makes every durable consumer of js's streams with
// deliveries pending hand them out again at the next fetch, instead of
// after its ack wait, and reports which consumers it asked. It is for a
// server whose earlier clients are all known to be gone: an embedded
// server its process has just started, before anything fetches.
//
// It sets each such consumer's ack wait to a millisecond, waits for the
// server's review of its pending deliveries, and sets it back. Unlike a
// consumer reset, this keeps the delivery counts, on which redelivered
// work relies (a turn resumes from its checkpoint on delivery 2 or later;
// the consumers' MaxDeliver and the worker's attempts count them). If the
// review comes after the ack wait is back, the deliveries wait it out as
// before; a consumer left at the short wait is set back by its owner,
// which updates its consumer when it starts.
func RedeliverPending(ctx context.Context, js jetstream.JetStream) ([]Redelivery, error) {
	pending, err := pendingConsumers(ctx, js)
	if err != nil || len(pending) == 0 {
		return nil, err
	}
	var errs []error
	var shortened []pendingConsumer
	for _, c := range pending {
		short := c.cfg
		short.AckWait = time.Millisecond
		if _, err := js.UpdateConsumer(ctx, c.stream, short); err != nil {
			errs = append(errs, fmt.Errorf("redeliver pending: shorten the ack wait of %s > %s: %w", c.stream, c.cfg.Durable, err))
			continue
		}
		shortened = append(shortened, c)
	}
	if len(shortened) == 0 {
		return nil, errors.Join(errs...)
	}
	// Set back even when ctx ends meanwhile.
	_ = backoff.Sleep(ctx, pendingSweep)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CallTimeout)
	defer cancel()
	var done []Redelivery
	for _, c := range shortened {
		if _, err := js.UpdateConsumer(rctx, c.stream, c.cfg); err != nil {
			errs = append(errs, fmt.Errorf("redeliver pending: restore the ack wait of %s > %s: %w", c.stream, c.cfg.Durable, err))
			continue
		}
		done = append(done, Redelivery{Stream: c.stream, Consumer: c.cfg.Durable, Messages: c.pending})
	}
	return done, errors.Join(errs...)
}

// pendingConsumer is a durable consumer with deliveries pending.
type pendingConsumer struct {
	stream  string
	cfg     jetstream.ConsumerConfig
	pending int
}

// pendingConsumers lists the durable consumers of js's streams that have
// deliveries pending and whose ack wait RedeliverPending can shorten
// (explicit acks, no BackOff, which would override the ack wait). Only
// streams with consumers are asked for theirs.
func pendingConsumers(ctx context.Context, js jetstream.JetStream) ([]pendingConsumer, error) {
	streams := js.ListStreams(ctx)
	var names []string
	for si := range streams.Info() {
		if si.State.Consumers > 0 {
			names = append(names, si.Config.Name)
		}
	}
	if err := streams.Err(); err != nil {
		return nil, fmt.Errorf("redeliver pending: list streams: %w", err)
	}
	var out []pendingConsumer
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("redeliver pending: stream %s: %w", name, err)
		}
		consumers := s.ListConsumers(ctx)
		for ci := range consumers.Info() {
			c := ci.Config
			if ci.NumAckPending > 0 && c.Durable != "" && c.AckPolicy == jetstream.AckExplicitPolicy && len(c.BackOff) == 0 && c.AckWait > time.Millisecond {
				out = append(out, pendingConsumer{stream: name, cfg: c, pending: ci.NumAckPending})
			}
		}
		if err := consumers.Err(); err != nil {
			return nil, fmt.Errorf("redeliver pending: consumers of %s: %w", name, err)
		}
	}
	return out, nil
}
