package bustest

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

// LeaseWatch sees the writes to the fleet's lease bucket under the keys
// with a prefix, each stamped with the server's time of the write.
type LeaseWatch struct {
	entries chan jetstream.KeyValueEntry
}

// WatchLeases watches the lease bucket of b from the current entries on,
// until the end of the test.
func WatchLeases(t testing.TB, b *bus.Bus, prefix string) *LeaseWatch {
	t.Helper()
	kv, err := b.KV(t.Context(), bus.BucketLeases)
	if err != nil {
		t.Fatalf("open the lease bucket: %v", err)
	}
	w, err := kv.WatchAll(t.Context())
	if err != nil {
		t.Fatalf("watch the lease bucket: %v", err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	// Buffered beyond the renewals of any test's run, so the watcher
	// never waits on the test.
	lw := &LeaseWatch{entries: make(chan jetstream.KeyValueEntry, 4096)}
	go func() {
		for e := range w.Updates() {
			if e != nil && strings.HasPrefix(e.Key(), prefix) {
				lw.entries <- e
			}
		}
	}()
	return lw
}

// TakeoverAfterExpiry waits up to within for another holder to take the
// lease and checks that it took it because the holder's lease expired: the
// holder never released it (no delete between its last renewal and the
// new holder's write) and the new holder wrote at least ttl after that
// renewal, by the server's clock. It returns both holders' names.
func (w *LeaseWatch) TakeoverAfterExpiry(t testing.TB, ttl, within time.Duration) (from, to string) {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	var last, released jetstream.KeyValueEntry
	for {
		var e jetstream.KeyValueEntry
		select {
		case e = <-w.entries:
		case <-timer.C:
			t.Fatalf("nobody took the lease over within %s", within)
		}
		switch {
		case e.Operation() != jetstream.KeyValuePut:
			released = e
		case last == nil || string(e.Value()) == string(last.Value()):
			last, released = e, nil
		default:
			if released != nil {
				t.Fatalf("%s released lease %s before %s took it: not a takeover of an expired lease", last.Value(), e.Key(), e.Value())
			}
			if e.Key() != last.Key() {
				t.Fatalf("lease %s held by %s, then lease %s by %s: two leases", last.Key(), last.Value(), e.Key(), e.Value())
			}
			if gap := e.Created().Sub(last.Created()); gap < ttl {
				t.Fatalf("%s took lease %s %s after %s renewed it, before its TTL %s ran out", e.Value(), e.Key(), gap, last.Value(), ttl)
			}
			return string(last.Value()), string(e.Value())
		}
	}
}
