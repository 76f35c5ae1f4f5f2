package bustest

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

// WaitAcked waits up to within until the consumer of stream is done with
// n messages: the stream holds n on the consumer's FilterSubject, and the
// consumer holds none (none left to deliver, none delivered and not yet
// acknowledged or terminated). The stream must keep its messages (limits
// retention). A test learns so that the consumer's client is done with
// the n messages it expects, also those not stored yet when it asks.
func WaitAcked(t testing.TB, b *bus.Bus, stream, consumer string, n int, within time.Duration) {
	t.Helper()
	Eventually(t, within, func() error {
		c, err := b.JS.Consumer(t.Context(), stream, consumer)
		if err != nil {
			return err
		}
		info := c.CachedInfo()
		st, err := b.JS.Stream(t.Context(), stream)
		if err != nil {
			return err
		}
		si, err := st.Info(t.Context(), jetstream.WithSubjectFilter(info.Config.FilterSubject))
		if err != nil {
			return err
		}
		var stored uint64
		for _, k := range si.State.Subjects {
			stored += k
		}
		if stored < uint64(n) || info.NumPending > 0 || info.NumAckPending > 0 {
			return fmt.Errorf("consumer %s of %s: %d of %d messages stored, %d pending, %d unacknowledged",
				consumer, stream, stored, n, info.NumPending, info.NumAckPending)
		}
		return nil
	})
}
