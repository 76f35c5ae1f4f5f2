package bus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// FromNow is the start of an ordered consumer of stream that must see
// every message stored from now on: the sequence the next message will
// get. DeliverNew means the same only when the consumer is made: nats.go
// makes an ordered consumer that lost its server (missed heartbeats: the
// node went down or stalled) again with the policy it was given when it
// had not delivered anything yet, so it started from the moment it was
// made again and skipped what was stored in between. A start sequence
// stays where it was.
func (b *Bus) FromNow(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.OrderedConsumerConfig, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	s, err := b.JS.Stream(ctx, stream)
	if err != nil {
		return cfg, fmt.Errorf("read the last sequence of %s: %w", stream, err)
	}
	cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
	cfg.OptStartSeq = s.CachedInfo().State.LastSeq + 1
	return cfg, nil
}
