package llm

import (
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"2", 2 * time.Second, true},
		{" 1.5 ", 1500 * time.Millisecond, true},
		{"-3", 0, true},
		{"Thu, 02 Jan 2025 03:04:15 GMT", 10 * time.Second, true},
		{"Thu, 02 Jan 2025 03:00:00 GMT", 0, true},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	s := settings{backoffBase: 100 * time.Millisecond, backoffMax: time.Second}
	tests := []struct {
		n      int
		lo, hi time.Duration
	}{
		{0, 50 * time.Millisecond, 100 * time.Millisecond},
		{1, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 400 * time.Millisecond, 800 * time.Millisecond},
		{4, 500 * time.Millisecond, time.Second},
		{100, 500 * time.Millisecond, time.Second},
	}
	for _, tt := range tests {
		for range 50 {
			if d := s.backoff(tt.n); d < tt.lo || d > tt.hi {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", tt.n, d, tt.lo, tt.hi)
			}
		}
	}
}
