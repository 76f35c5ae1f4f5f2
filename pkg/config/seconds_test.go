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
