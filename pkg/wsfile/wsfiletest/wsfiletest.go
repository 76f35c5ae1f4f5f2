// Package wsfiletest runs, in tests, calls that must not wait on a FIFO,
// and swaps a FIFO in for a directory while they run.
package wsfiletest

import (
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// KeepExchanging exchanges the names a and b (a directory and a FIFO, say)
// once, skipping the test if the file system cannot, and then again and
// again on a goroutine of its own until the test ends: a reader that
// checks a and then opens it may open b. Among the cleanups it stops the
// goroutine, failing the test if it has not stopped within 10 s.
func KeepExchanging(t testing.TB, a, b string) {
	t.Helper()
	exchange := func() error { return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE) }
	if err := exchange(); err != nil {
		t.Skipf("the file system cannot exchange names: %v", err)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = exchange()
		}
	}()
	t.Cleanup(func() {
		close(stop)
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Error("the goroutine exchanging names did not stop")
		}
	})
}
