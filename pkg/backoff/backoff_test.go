package backoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/backoff"
)

func TestWait(t *testing.T) {
	tests := []struct {
		name   string
		b      backoff.Backoff
		n      int
		lo, hi time.Duration
	}{
		{"first wait", backoff.Backoff{Min: 100 * time.Millisecond, Max: time.Second}, 0, 50 * time.Millisecond, 100 * time.Millisecond},
		{"second wait", backoff.Backoff{Min: 100 * time.Millisecond, Max: time.Second}, 1, 100 * time.Millisecond, 200 * time.Millisecond},
		{"doubles", backoff.Backoff{Min: 100 * time.Millisecond, Max: time.Second}, 2, 200 * time.Millisecond, 400 * time.Millisecond},
		{"fourth wait", backoff.Backoff{Min: 100 * time.Millisecond, Max: time.Second}, 3, 400 * time.Millisecond, 800 * time.Millisecond},
		{"reaches the cap", backoff.Backoff{Min: 100 * time.Millisecond, Max: time.Second}, 4, 500 * time.Millisecond, time.Second},
		{"capped", backoff.Backoff{Min: 100 * time.Millisecond, Max: time.Second}, 40, 500 * time.Millisecond, time.Second},
		{"capped far out", backoff.Backoff{Min: 100 * time.Millisecond, Max: time.Second}, 100, 500 * time.Millisecond, time.Second},
		{"no overflow", backoff.Backoff{Min: 100 * time.Millisecond, Max: time.Second}, 1 << 40, 500 * time.Millisecond, time.Second},
		{"zero value: defaults", backoff.Backoff{}, 0, 125 * time.Millisecond, 250 * time.Millisecond},
		{"zero value capped at 15s", backoff.Backoff{}, 100, 7500 * time.Millisecond, 15 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for range 50 {
				d := tt.b.Wait(tt.n)
				if d < tt.lo || d > tt.hi {
					t.Fatalf("Wait(%d) = %s, want in [%s, %s]", tt.n, d, tt.lo, tt.hi)
				}
				seen[d] = true
			}
			if len(seen) < 2 {
				t.Errorf("Wait(%d) gave the same wait 50 times: no jitter", tt.n)
			}
		})
	}
}

func TestDelay(t *testing.T) {
	b := backoff.Backoff{Min: 20 * time.Millisecond, Max: 2 * time.Second}
	tests := []struct {
		name string
		b    backoff.Backoff
		n    int
		want time.Duration
	}{
		{"first", b, 0, 20 * time.Millisecond},
		{"doubles", b, 1, 40 * time.Millisecond},
		{"doubles again", b, 3, 160 * time.Millisecond},
		{"last below the cap", b, 6, 1280 * time.Millisecond},
		{"capped", b, 7, 2 * time.Second},
		{"no overflow", b, 1 << 40, 2 * time.Second},
		{"zero value: defaults", backoff.Backoff{}, 0, 250 * time.Millisecond},
		{"zero value capped at 15s", backoff.Backoff{}, 100, 15 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.Delay(tt.n); got != tt.want {
				t.Errorf("Delay(%d) = %s, want %s", tt.n, got, tt.want)
			}
		})
	}
}

func TestSleep(t *testing.T) {
	done, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want error
	}{
		{"waits", t.Context(), time.Millisecond, nil},
		{"zero: no wait", t.Context(), 0, nil},
		{"negative: no wait", t.Context(), -time.Second, nil},
		{"ended ctx", done, time.Hour, context.Canceled},
		{"ended ctx, zero", done, 0, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := backoff.Sleep(tt.ctx, tt.d); !errors.Is(err, tt.want) {
				t.Errorf("Sleep(%s) = %v, want %v", tt.d, err, tt.want)
			}
		})
	}
}
