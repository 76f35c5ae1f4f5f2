package every_test

import (
	"context"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/every"
)

// TestTickStops: Tick returns when f says so, and when ctx ends.
func TestTickStops(t *testing.T) {
	cases := []struct {
		name   string
		cancel bool // end ctx after the third call instead of returning false
	}{
		{"f returns false", false},
		{"ctx ends", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var n int
			done := make(chan struct{})
			go func() {
				defer close(done)
				every.Tick(ctx, time.Millisecond, func() bool {
					n++
					if n == 3 && c.cancel {
						cancel()
					}
					return n < 3
				})
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Tick did not return")
			}
			if n != 3 {
				t.Errorf("f ran %d times, want 3", n)
			}
		})
	}
}

// TestGoStopWaits: after stop returns, f runs no more. f writes n
// without a lock: under -race, a call after stop would be reported.
func TestGoStopWaits(t *testing.T) {
	var n int
	ran := make(chan struct{})
	stop := every.Go(t.Context(), time.Millisecond, func() bool {
		n++
		if n == 2 {
			close(ran)
		}
		return true
	})
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("f did not run twice")
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return")
	}
	t.Logf("f ran %d times", n) // read after stop: -race reports a call after it
}

// TestTickNowCallsAtOnce: the first call does not wait for d, and f
// returning false ends it there.
func TestTickNowCallsAtOnce(t *testing.T) {
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		every.TickNow(t.Context(), time.Hour, func() bool { calls++; return false })
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("TickNow waited for its period before the first call")
	}
	if calls != 1 {
		t.Errorf("%d calls, want 1", calls)
	}
}
