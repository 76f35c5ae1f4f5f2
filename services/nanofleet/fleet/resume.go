package fleet

import (
	"context"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

// resumeInterrupted hands back at once the work a killed predecessor left
// unacknowledged. It runs right after the embedded server started, so
// every delivery still pending was to a client of the previous process:
// without it, an interrupted turn waits out the workers' ack wait (30 s)
// and an undelivered reply the gateway's (60 s) before anyone takes them
// again. The turn protocol takes a redelivery whatever its cause: a
// committed turn is acknowledged with its replies sent again
// (deduplicated), a checkpointed one resumes, and the lease the killed
// worker held is taken over, being under this node's name. A client of
// the previous server that reconnects and still works on one of them
// keeps its lease, so the redelivery waits for it as for any busy
// session.
func (f *Fleet) resumeInterrupted(ctx context.Context) error {
	reset, err := bus.ResetPending(ctx, f.Bus.JS)
	for _, r := range reset {
		f.log.Info("resuming work the last run left unfinished", "stream", r.Stream, "consumer", r.Consumer, "messages", r.Messages)
	}
	return err
}
