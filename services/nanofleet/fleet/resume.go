package fleet

import (
	"context"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

// resumeInterrupted hands out again at once the work a killed predecessor
// left unacknowledged: on a server that has just started, every delivery
// still pending was to a client of the previous process, and would
// otherwise wait out its consumer's ack wait (a turn 30 s, a reply at the
// gateway 60 s). It runs before any part of the fleet fetches, and keeps
// the delivery counts (see [bus.RedeliverPending]), so a checkpointed turn
// resumes from its checkpoint and a message that kills the process still
// counts toward worker.maxAttempts. What it cannot hand back waits out its
// ack wait, as before.
func (f *Fleet) resumeInterrupted(ctx context.Context) {
	done, err := bus.RedeliverPending(ctx, f.Bus.JS)
	for _, r := range done {
		f.log.Info("resuming work the last run left unfinished", "stream", r.Stream, "consumer", r.Consumer, "messages", r.Messages)
	}
	if err != nil {
		f.log.Warn("some of the last run's unfinished work resumes after its ack wait, not at once", "err", err)
	}
}
