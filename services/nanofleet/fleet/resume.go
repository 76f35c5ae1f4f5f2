package fleet

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// resumeInterrupted hands back at once the work a killed predecessor left
// unacknowledged. It runs right after the embedded server started, so
// every delivery still pending was to a client of the previous process:
// without it, an interrupted turn waits out the workers' ack wait (30 s)
// and an undelivered reply the gateway's (60 s) before anyone takes them
// again. Each consumer with deliveries pending is reset to its ack floor,
// which redelivers them now. The turn protocol takes a redelivery
// whatever its cause: a committed turn is acknowledged with its replies
// sent again (deduplicated), a checkpointed one resumes, and the lease
// the killed worker held is taken over, being under this node's name. A
// client of the previous server that reconnects and still works on one
// of them keeps its lease, so the redelivery waits for it as for any
// busy session.
func (f *Fleet) resumeInterrupted(ctx context.Context) error {
	js := f.Bus.JS
	// One listing of every stream's state; only those with consumers are
	// asked further (a one-shot `agent -m` starts here, too).
	streams := js.ListStreams(ctx)
	var names []string
	for si := range streams.Info() {
		if si.State.Consumers > 0 {
			names = append(names, si.Config.Name)
		}
	}
	if err := streams.Err(); err != nil {
		return fmt.Errorf("resume interrupted work: list streams: %w", err)
	}
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("resume interrupted work: stream %s: %w", name, err)
		}
		consumers := s.ListConsumers(ctx)
		var pending []*jetstream.ConsumerInfo
		for ci := range consumers.Info() {
			if ci.NumAckPending > 0 {
				pending = append(pending, ci)
			}
		}
		if err := consumers.Err(); err != nil {
			return fmt.Errorf("resume interrupted work: consumers of %s: %w", name, err)
		}
		for _, ci := range pending {
			if _, err := s.ResetConsumer(ctx, ci.Name); err != nil {
				return fmt.Errorf("resume interrupted work: reset consumer %s of %s: %w", ci.Name, name, err)
			}
			f.log.Info("resuming work the last run left unfinished", "stream", name, "consumer", ci.Name, "messages", ci.NumAckPending)
		}
	}
	return nil
}
