package backoff_test

import (
	"math"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/backoff"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"absent", "", 0, false},
		{"blank", "  ", 0, false},
		{"zero", "0", 0, true},
		{"seconds", "2", 2 * time.Second, true},
		{"fractional seconds, spaced", " 1.5 ", 1500 * time.Millisecond, true},
		{"negative", "-3", 0, true},
		{"HTTP date", "Thu, 02 Jan 2025 03:04:15 GMT", 10 * time.Second, true},
		{"HTTP date past", "Thu, 02 Jan 2025 03:00:00 GMT", 0, true},
		{"RFC 850 date", "Thursday, 02-Jan-25 03:04:06 GMT", time.Second, true},
		{"garbage", "soon", 0, false},
		{"number and garbage", "5s", 0, false},
		{"NaN", "NaN", 0, false},
		{"Inf", "Inf", 0, false},
		{"too long", "1e300", math.MaxInt64, true},
		{"beyond float64", "1e400", math.MaxInt64, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := backoff.RetryAfter(tt.in, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// FuzzRetryAfter: whatever a server sends, the wait is never negative,
// and a value that is not ok asks for none.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "2", "1.5", "-3", "1e400", "NaN", "Thu, 02 Jan 2025 03:04:15 GMT", "soon"} {
		f.Add(s)
	}
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := backoff.RetryAfter(v, now)
		if d < 0 || !ok && d != 0 {
			t.Errorf("RetryAfter(%q) = %v, %v", v, d, ok)
		}
	})
}
