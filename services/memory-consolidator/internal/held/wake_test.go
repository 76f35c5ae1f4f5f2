package held

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
)

// TestWaiterWakesOnRelease: a waiter whose polls are an hour apart still
// takes the lease once its holder releases it, woken by its watch.
func TestWaiterWakesOnRelease(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	ls, err := Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	ls.poll, ls.pollMax = time.Hour, time.Hour
	const key = "memory.document.agent.default.="
	first, _, err := ls.Take(ctx, key, "a", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	taken := make(chan error, 1)
	go func() {
		l, _, err := ls.Take(ctx, key, "b", time.Minute, nil)
		if err == nil {
			err = l.Release(ctx)
		}
		taken <- err
	}()
	// The waiter's watch is a consumer on the lease bucket's stream.
	kv, err := b.KV(ctx, bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 10*time.Second, func() error {
		st, err := kv.Status(ctx)
		if err != nil {
			return err
		}
		if st.(*jetstream.KeyValueBucketStatus).StreamInfo().State.Consumers == 0 {
			return errors.New("the waiter does not watch the lease yet")
		}
		return nil
	})
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-taken:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not take the released lease within 10s")
	}
}
