package held_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/held"
)

func TestTakeIsExclusive(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	ls, err := held.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			l, _, err := ls.Take(ctx, "memory.consolidate.cli=3Ax", "o", 10*time.Second, nil)
			if err != nil {
				t.Errorf("take %d: %v", i, err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			// Holding the lock a while, so that a second holder, if Take
			// let one in, would be inside at the same time.
			time.Sleep(10 * time.Millisecond)
			inside.Add(-1)
			if err := l.Release(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d holders at once", most.Load())
	}
}

// TestLostLeaseEndsTheJob: a lease taken over by someone else ends the
// job's context with a cause that is ErrLost and keeps the renewal's
// error (lease.ErrLost) in its chain.
func TestLostLeaseEndsTheJob(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	kv, err := b.KV(ctx, bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	const key = "memory.consolidate.cli=3Ay"
	l, job, err := held.New(kv, 50*time.Millisecond).Take(ctx, key, "a", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	if _, err := kv.Put(ctx, key, []byte("someone else")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-job.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the job went on after its lease was taken over")
	}
	cause := context.Cause(job)
	if !errors.Is(cause, held.ErrLost) || !errors.Is(cause, lease.ErrLost) {
		t.Fatalf("cause = %v, want held.ErrLost wrapping lease.ErrLost", cause)
	}
}
