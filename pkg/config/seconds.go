package config

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// Seconds is a duration the file writes as a whole number of seconds
// (nanobot's "…Seconds" and "…S" keys), so that a section's owner can put
// it in its own Config with a json tag and use it as a time.Duration.
type Seconds time.Duration

// UnmarshalJSON reads a whole number of seconds. A value of another type
// fails with a *json.UnmarshalTypeError, which the decoder names by its
// full key.
func (s *Seconds) UnmarshalJSON(data []byte) error {
	var n int64
	if err := json.Unmarshal(data, &n); err != nil {
		return err
	}
	*s = Seconds(SecondsDuration(n))
	return nil
}

// MaxSeconds is the most whole seconds a time.Duration holds (292 years).
const MaxSeconds = math.MaxInt64 / int64(time.Second)

// SecondsDuration is n seconds, the file's unit, as a time.Duration;
// beyond a Duration's range (292 years) it is held at the most whole
// seconds one holds, so that it still reads as seconds (a whole-seconds
// check passes it; it writes back as MaxSeconds). Multiplied out, such a
// value wraps around to any duration, a small one included
// (36028797018964028 s to exactly a minute), and passes an owner's range
// check as another value than the file's. Every conversion of a file's
// seconds, or of seconds a platform sends, goes through it.
func SecondsDuration[N ~int | ~int64](n N) time.Duration {
	return time.Duration(max(min(int64(n), MaxSeconds), -MaxSeconds)) * time.Second
}

// MarshalJSON writes whole seconds.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, int64(time.Duration(s)/time.Second), 10), nil
}

func (s Seconds) String() string { return time.Duration(s).String() }
