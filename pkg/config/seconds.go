package config

import (
	"encoding/json"
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
	*s = Seconds(time.Duration(n) * time.Second)
	return nil
}

// MarshalJSON writes whole seconds.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, int64(time.Duration(s)/time.Second), 10), nil
}

func (s Seconds) String() string { return time.Duration(s).String() }
