package config

import (
	"encoding/json"
	"testing"
	"time"
)

// held is the bound a value past a Duration's range is held at: the most
// whole seconds a Duration holds.
const held = time.Duration(MaxSeconds) * time.Second

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
		{"-9223372036", -9223372036 * time.Second},
		{"9223372037", held},
		{"18446744075", held},
		{"36028797018964028", held}, // wrapped to exactly a minute
		{"9223372036854775807", held},
		{"-18446744075", -held},
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

// TestHeldSecondsAreWholeSeconds: a value held at the bound is still a
// whole number of seconds, so an owner's whole-seconds check takes it as
// the long interval it is, and it writes back as seconds.
func TestHeldSecondsAreWholeSeconds(t *testing.T) {
	var s Seconds
	if err := json.Unmarshal([]byte("36028797018964028"), &s); err != nil {
		t.Fatal(err)
	}
	if time.Duration(s)%time.Second != 0 {
		t.Errorf("held at %s, not whole seconds", time.Duration(s))
	}
	if out, err := json.Marshal(s); err != nil || string(out) != "9223372036" {
		t.Errorf("written back as %s, %v; want 9223372036", out, err)
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
		{36028797018964028, held},
		{-36028797018964028, -held},
	} {
		if got := SecondsDuration(tt.n); got != tt.want {
			t.Errorf("SecondsDuration(%d) = %s, want %s", tt.n, got, tt.want)
		}
	}
}
