package llm

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestLimiterAIMD(t *testing.T) {
	t.Parallel()
	type step struct {
		acquire int  // calls to start
		release int  // calls to end (the oldest first)
		limited bool // the ended calls were answered 429
	}
	tests := []struct {
		name      string
		ceiling   int
		steps     []step
		wantLimit int
	}{
		{"ceiling holds without 429s", 4, []step{{acquire: 4}, {release: 4}}, 4},
		{"a 429 halves what was in flight", 0, []step{{acquire: 10}, {release: 1, limited: true}}, 5},
		{"a burst of 429s halves once", 0, []step{{acquire: 10}, {release: 6, limited: true}}, 5},
		{"each success adds one", 8, []step{{acquire: 8}, {release: 1, limited: true}, {release: 3}}, 7},
		{"never below one", 0, []step{{acquire: 1}, {release: 1, limited: true}}, 1},
		{"growth stops at the ceiling", 4, []step{{acquire: 4}, {release: 1, limited: true}, {release: 3}, {acquire: 4}, {release: 4}}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLimiter(tt.ceiling)
			var epochs []uint64
			for _, s := range tt.steps {
				for range s.acquire {
					ctx, cancel := context.WithTimeout(t.Context(), time.Second)
					e, err := l.acquire(ctx)
					cancel()
					if err != nil {
						t.Fatalf("acquire: %v", err)
					}
					epochs = append(epochs, e)
				}
				for range s.release {
					l.release(epochs[0], s.limited)
					epochs = epochs[1:]
				}
			}
			if got, _ := l.current(); got != tt.wantLimit {
				t.Errorf("limit %d, want %d", got, tt.wantLimit)
			}
		})
	}
}

func TestLimiterWaitersInOrder(t *testing.T) {
	t.Parallel()
	// In a bubble: synctest.Wait says when a waiter has queued, and the
	// timeouts run on the bubble's clock.
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(1)
		e, err := l.acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		// A waiter that gives up leaves no trace.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := l.acquire(ctx); err == nil {
			t.Fatal("acquire with a done context succeeded while full")
		}
		got := make(chan int, 3)
		for i := range 3 {
			go func() {
				e, err := l.acquire(t.Context())
				if err != nil {
					t.Error(err)
					return
				}
				got <- i
				l.release(e, false)
			}()
			// Queue them in order: this one waits before the next starts.
			synctest.Wait()
			l.mu.Lock()
			n := l.waiters.Len()
			l.mu.Unlock()
			if n != i+1 {
				t.Fatalf("waiter %d never queued: %d waiting", i, n)
			}
		}
		l.release(e, false)
		for want := range 3 {
			select {
			case i := <-got:
				if i != want {
					t.Fatalf("waiter %d served before %d", i, want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("waiter %d never served", want)
			}
		}
		if _, inflight := l.current(); inflight != 0 {
			t.Errorf("%d in flight after all released", inflight)
		}
	})
}
