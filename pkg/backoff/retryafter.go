package backoff

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryAfter reads a Retry-After header value (or a platform's header of
// the same meaning): delay-seconds, fractional seconds as some servers
// send them, or an HTTP date, counted from now. ok is false when v is
// absent or unreadable ("NaN" and "Inf" included); a negative delay or a
// date already past is ok with no wait: the server asks for none. A delay
// too long for a time.Duration is cut to the longest one.
func RetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	secs, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		t, err := http.ParseTime(v)
		if err != nil {
			return 0, false
		}
		return max(t.Sub(now), 0), true
	case math.IsNaN(secs), math.IsInf(secs, 0) && err == nil:
		return 0, false
	case secs <= 0:
		return 0, true
	case secs >= math.MaxInt64/float64(time.Second):
		return math.MaxInt64, true
	}
	return time.Duration(secs * float64(time.Second)), true
}
