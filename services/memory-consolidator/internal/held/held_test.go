package held_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/held"
)

func TestTakeIsExclusive(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	raw, err := b.KV(ctx, bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	st, err := raw.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kv := &refusing{KeyValue: raw, refused: make(chan struct{}, 1)}
	ls := held.New(kv, st.TTL()/3)
	const takers = 8
	var inside, most, taken atomic.Int32
	var wg sync.WaitGroup
	for i := range takers {
		wg.Go(func() {
			l, _, err := ls.Take(ctx, "memory.consolidate.cli=3Ax", "o", 10*time.Second, nil)
			if err != nil {
				t.Errorf("take %d: %v", i, err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			// Holding the lock until another Take, while one is left,
			// has been refused it: a second holder, if Take let one in,
			// would be inside at the same time.
			if taken.Add(1) < takers {
				select {
				case <-kv.refused: // one from before this holder took it
				default:
				}
				select {
				case <-kv.refused:
				case <-time.After(10 * time.Second):
					t.Errorf("take %d: no other Take tried the lease within 10s while it was held", i)
				}
			}
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

// refusing is a lease bucket that signals each Create refused because
// the key exists: a Take finding the lease held.
type refusing struct {
	jetstream.KeyValue
	refused chan struct{}
}

func (r *refusing) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	rev, err := r.KeyValue.Create(ctx, key, value, opts...)
	if errors.Is(err, jetstream.ErrKeyExists) {
		select {
		case r.refused <- struct{}{}:
		default:
		}
	}
	return rev, err
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
