package svctest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// DefaultStopWithin is how long the stop [Run] returns waits for the
// component to return once its context ends, unless [StopWithin] says.
const DefaultStopWithin = 30 * time.Second

// An Option changes how [Run] runs a component.
type Option func(*options)

type options struct {
	ready       <-chan struct{}
	readyWithin time.Duration
	stopWithin  time.Duration
}

// Ready makes [Run] return only once up is closed (a component's
// Serving, Listening or Started), failing the test if the component's
// run returns first or up is not closed within the given time.
func Ready(up <-chan struct{}, within time.Duration) Option {
	return func(o *options) { o.ready, o.readyWithin = up, within }
}

// StopWithin bounds how long stop waits for the component to return once
// its context ends (DefaultStopWithin without it).
func StopWithin(d time.Duration) Option {
	return func(o *options) { o.stopWithin = d }
}

// Run runs a component's run function (its Run method) in a goroutine
// until the test ends, on a context of its own: not t.Context(), which
// is already cancelled when cleanups run, so that the component outlives
// the test's own work and stops in its turn among the cleanups, before
// what was set up before it (the bus) goes away.
//
// stop cancels that context and waits for run to return, failing the
// test if it does not within the stop bound; it returns what run
// returned, and calling it again returns the same. A cleanup calls stop
// and fails the test if run returned an error other than the
// cancellation (a component stopped while it still started); a test
// that calls stop itself owns that error (check it, or ignore it when
// the component is expected to fail). Call stop from the test's
// goroutine.
func Run(t testing.TB, run func(context.Context) error, opts ...Option) (stop func() error) {
	t.Helper()
	o := options{stopWithin: DefaultStopWithin}
	for _, opt := range opts {
		opt(&o)
	}
	if o.stopWithin <= 0 || (o.ready != nil && o.readyWithin <= 0) {
		t.Fatalf("svctest.Run: bounds must be positive (stop within %v, ready within %v)", o.stopWithin, o.readyWithin)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	ran := make(chan error, 1)
	go func() { ran <- run(ctx) }()

	var (
		once    sync.Once
		err     error
		claimed atomic.Bool // the test has run's error: the cleanup does not report it
	)
	end := func() error {
		t.Helper()
		// sync.Once, not sync.OnceValue: t.Fatalf ends the goroutine with
		// runtime.Goexit, which OnceValue would turn into a panic.
		once.Do(func() {
			cancel()
			timer := time.NewTimer(o.stopWithin)
			defer timer.Stop()
			select {
			case err = <-ran:
			case <-timer.C:
				t.Fatalf("run did not return within %v of its context ending", o.stopWithin)
			}
		})
		return err
	}
	stop = func() error {
		t.Helper()
		claimed.Store(true)
		return end()
	}
	t.Cleanup(func() {
		// A component stopped while it still starts returns the
		// cancellation its start was cut short by: the stop asked for it.
		if err := end(); err != nil && !errors.Is(err, context.Canceled) && !claimed.Load() {
			t.Errorf("run returned %v, want nil once its context ended", err)
		}
	})

	if o.ready == nil {
		return stop
	}
	timer := time.NewTimer(o.readyWithin)
	defer timer.Stop()
	select {
	case <-o.ready:
	case err := <-ran:
		ran <- err // for the cleanup's stop, which must not wait for it
		claimed.Store(true)
		t.Fatalf("run returned before it was ready: %v", err)
	case <-timer.C:
		t.Fatalf("not ready within %v", o.readyWithin)
	}
	return stop
}
