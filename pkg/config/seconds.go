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
	// Beyond a Duration's range (292 years) the value is held at its
	// bound: multiplied out, it would wrap around to any duration, a
	// small one included, and pass the owner's range check as another
	// value than the file's.
	const most = math.MaxInt64 / int64(time.Second)
	switch {
	case n > most:
		*s = Seconds(math.MaxInt64)
	case n < -most:
		*s = Seconds(math.MinInt64)
	default:
		*s = Seconds(time.Duration(n) * time.Second)
	}
	return nil
}

// MarshalJSON writes whole seconds.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, int64(time.Duration(s)/time.Second), 10), nil
}

func (s Seconds) String() string { return time.Duration(s).String() }
