package config

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// TestSecondsBeyondADuration: a number of seconds is read as that many
// seconds, and one past a time.Duration's range is held at its bound:
// 18446744075 s multiplied out in nanoseconds wrapped around to 1.29 s,
// which an owner's "at least 1 s" check passed.
func TestSecondsBeyondADuration(t *testing.T) {
	for _, tt := range []struct {
		json string
		want time.Duration
	}{
		{"0", 0},
		{"90", 90 * time.Second},
		{"-5", -5 * time.Second},
		{"9223372036", 9223372036 * time.Second},
		{"9223372037", math.MaxInt64},
		{"18446744075", math.MaxInt64},
		{"36028797018964028", math.MaxInt64}, // wrapped to exactly a minute
		{"9223372036854775807", math.MaxInt64},
		{"-18446744075", math.MinInt64},
	} {
		var s Seconds
		if err := json.Unmarshal([]byte(tt.json), &s); err != nil {
			t.Errorf("%s: %v", tt.json, err)
			continue
		}
		if time.Duration(s) != tt.want {
			t.Errorf("%s seconds read as %s, want %s", tt.json, time.Duration(s), tt.want)
		}
	}
}

// TestSecondsDurationOfAnInt: the conversion the owners use for their int
// keys (tools.web.fetch.timeout, nats.leaseTtlSeconds, …) holds the same
// bound as Seconds.
func TestSecondsDurationOfAnInt(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want time.Duration
	}{
		{30, 30 * time.Second},
		{36028797018964028, math.MaxInt64},
		{-36028797018964028, math.MinInt64},
	} {
		if got := SecondsDuration(tt.n); got != tt.want {
			t.Errorf("SecondsDuration(%d) = %s, want %s", tt.n, got, tt.want)
		}
	}
}
