// Package wsfiletest runs, in tests, calls that must not wait on a FIFO.
package wsfiletest

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// Within runs f and returns its error, failing the test if f has not
// returned after d: it waits on a FIFO (an open of one without a writer
// never returns). It then opens the FIFOs at fifos for writing, every
// 100 ms for up to 30 s, so that the waiting open returns and the test
// ends instead of hanging until the go test timeout.
func Within(t testing.TB, d time.Duration, fifos []string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
	}
	for range 300 {
		for _, p := range fifos {
			if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
		}
		select {
		case <-done:
			t.Fatalf("still waiting after %v: a FIFO was opened", d)
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("still waiting after %v: a FIFO was opened; writing to it did not end the wait", d)
	return nil
}
