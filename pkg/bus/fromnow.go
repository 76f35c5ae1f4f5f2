package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// FollowHeartbeat is the idle heartbeat of an ordered consumer someone
// waits on (a gateway's watch, the CLI's client, a subagent's result):
// pass it as jetstream.PullHeartbeat to Consume. nats.go makes an ordered
// consumer again only after two missed heartbeats; the "server shutdown"
// status a node sends its pending pulls as it stops does not do it. At
// nats.go's default of 5 s, whoever waited on a consumer held by a node
// that shut down got nothing for 10 s; at 1 s, 2 s. The price is one
// heartbeat a second per idle consumer.
const FollowHeartbeat = time.Second

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
