// Package runnertest runs a tool runner for the length of a test.
package runnertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
)

// Run runs r until the test ends and returns once it takes calls (failing
// the test if it does not within a minute). stop ends Run early and
// returns its error; the cleanup calls it too, and later calls return the
// first one's error.
func Run(t testing.TB, r *runner.Runner) (stop func() error) {
	t.Helper()
	// Not t.Context(): it is already cancelled when cleanups run, and the
	// runner must outlive the test's own work.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = bustest.Receive(t, done, time.Minute)
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	select {
	case <-r.Serving():
	case err := <-done:
		// Run has returned: the cleanup's stop must not wait for it.
		done <- err
		t.Fatalf("runner stopped before serving: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("runner not serving after a minute")
	}
	return stop
}
