package bustest

import (
	"testing"
	"time"
)

// Receive returns the next value from ch, failing the test if none comes
// within the given time, so that a lost event fails the test at once
// instead of hanging it until the go test timeout. A closed channel
// yields its zero value, as a bare receive would.
func Receive[T any](t testing.TB, ch <-chan T, within time.Duration) T {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("nothing received within %v", within)
		var zero T
		return zero
	}
}
