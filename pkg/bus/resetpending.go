package bus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// PendingReset is one consumer ResetPending handed back.
type PendingReset struct {
	Stream, Consumer string
	// Messages is how many deliveries it had pending.
	Messages int
}

// ResetPending resets every consumer of js's streams that has deliveries
// pending to its ack floor, so that they are redelivered now instead of
// after the consumer's ack wait, and reports which it reset. It is for a
// server every earlier client of which is known to be gone (an embedded
// server its process has just started): a live client's delivery would
// be handed to another meanwhile. Messages acknowledged out of order
// beyond the floor are delivered again too; consumers here take any
// redelivery. One listing of all streams; only streams with consumers
// are asked for theirs.
func ResetPending(ctx context.Context, js jetstream.JetStream) ([]PendingReset, error) {
	streams := js.ListStreams(ctx)
	var names []string
	for si := range streams.Info() {
		if si.State.Consumers > 0 {
			names = append(names, si.Config.Name)
		}
	}
	if err := streams.Err(); err != nil {
		return nil, fmt.Errorf("reset pending: list streams: %w", err)
	}
	var reset []PendingReset
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return reset, fmt.Errorf("reset pending: stream %s: %w", name, err)
		}
		consumers := s.ListConsumers(ctx)
		var pending []*jetstream.ConsumerInfo
		for ci := range consumers.Info() {
			if ci.NumAckPending > 0 {
				pending = append(pending, ci)
			}
		}
		if err := consumers.Err(); err != nil {
			return reset, fmt.Errorf("reset pending: consumers of %s: %w", name, err)
		}
		for _, ci := range pending {
			if _, err := s.ResetConsumer(ctx, ci.Name); err != nil {
				return reset, fmt.Errorf("reset pending: consumer %s of %s: %w", ci.Name, name, err)
			}
			reset = append(reset, PendingReset{Stream: name, Consumer: ci.Name, Messages: ci.NumAckPending})
		}
	}
	return reset, nil
}
