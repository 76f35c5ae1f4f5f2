package bustest

import (
	"testing"
	"time"
)

// Eventually calls check until it returns nil, failing the test with
// check's last error once within has passed. It is for states that no
// event announces (a key's TTL running out, a server's view of a
// cluster); where an event exists, wait on it instead.
func Eventually(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	const interval = 20 * time.Millisecond
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", within, err)
		}
		time.Sleep(interval)
	}
}
