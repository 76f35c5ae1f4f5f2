package held_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
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
