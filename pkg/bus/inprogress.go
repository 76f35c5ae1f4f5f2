package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/every"
)

// InProgress tells JetStream every period that m is still being worked
// on, so that a job longer than the consumer's AckWait is not redelivered
// to another process, until the returned stop is called or ctx ends. stop
// returns once the ticking has ended.
func InProgress(ctx context.Context, m jetstream.Msg, period time.Duration) (stop func()) {
	return every.Go(ctx, period, func() bool {
		_ = m.InProgress()
		return true
	})
}
