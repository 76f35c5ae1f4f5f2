package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// InProgress tells JetStream every period that m is still being worked
// on, so that a job longer than the consumer's AckWait is not redelivered
// to another process, until the returned stop is called or ctx ends. stop
// returns once the ticking has ended.
func InProgress(ctx context.Context, m jetstream.Msg, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	return func() { cancel(); <-done }
}
