package svctest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
)

// recorder is a testing.TB that records failures and cleanups, so that
// the tests can see Run fail a test.
type recorder struct {
	testing.TB
	ctx      context.Context
	cleanups []func()
	failures []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Context() context.Context  { return r.ctx }
func (r *recorder) Cleanup(f func())          { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(f string, a ...any) { r.failures = append(r.failures, fmt.Sprintf(f, a...)) }
func (r *recorder) Fatalf(f string, a ...any) { r.Errorf(f, a...); runtime.Goexit() }

// cleanup runs r's cleanups, last first, each on a goroutine of its own
// so that one that fails with Fatalf does not keep the others from
// running.
func (r *recorder) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		done := make(chan struct{})
		go func() { defer close(done); r.cleanups[i]() }()
		<-done
	}
}

// as runs body as a test on a recorder, then its cleanups, and returns
// its failures.
func as(t *testing.T, body func(tb testing.TB)) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &recorder{TB: t, ctx: ctx}
	for _, f := range []func(){func() { body(r) }, func() { cancel(); r.cleanup() }} {
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the test did not end")
		}
	}
	return r.failures
}

// component runs until its context ends, closing up first, and returns
// err.
func component(up chan struct{}, err error) func(context.Context) error {
	return func(ctx context.Context) error {
		close(up)
		<-ctx.Done()
		return err
	}
}

func TestRun(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		body func(tb testing.TB)
		want []string // what each failure says, in order
	}{
		{"stopped by the cleanup", func(tb testing.TB) {
			up := make(chan struct{})
			svctest.Run(tb, component(up, nil), svctest.Ready(up, time.Second))
		}, nil},
		{"an error at the cleanup's stop", func(tb testing.TB) {
			up := make(chan struct{})
			svctest.Run(tb, component(up, boom), svctest.Ready(up, time.Second))
		}, []string{"run returned boom"}},
		{"stopped while it started", func(tb testing.TB) {
			svctest.Run(tb, func(ctx context.Context) error {
				<-ctx.Done()
				return fmt.Errorf("open bucket: %w", ctx.Err())
			})
		}, nil},
		{"an error the test stopped for", func(tb testing.TB) {
			up := make(chan struct{})
			stop := svctest.Run(tb, component(up, boom), svctest.Ready(up, time.Second))
			if err := stop(); err != boom {
				tb.Errorf("stop = %v", err)
			}
			if err := stop(); err != boom {
				tb.Errorf("stop again = %v", err)
			}
		}, nil},
		{"returned before ready", func(tb testing.TB) {
			svctest.Run(tb, func(context.Context) error { return boom }, svctest.Ready(make(chan struct{}), time.Minute))
			tb.Errorf("Run returned")
		}, []string{"run returned before it was ready: boom"}},
		{"never ready", func(tb testing.TB) {
			svctest.Run(tb, component(make(chan struct{}), nil), svctest.Ready(make(chan struct{}), 10*time.Millisecond))
		}, []string{"not ready within 10ms"}},
		{"never stops", func(tb testing.TB) {
			release := make(chan struct{})
			tb.Cleanup(func() { close(release) })
			svctest.Run(tb, func(context.Context) error { <-release; return nil }, svctest.StopWithin(10*time.Millisecond))
		}, []string{"run did not return within 10ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := as(t, tt.body)
			if len(got) != len(tt.want) {
				t.Fatalf("failures %q, want %q", got, tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("failure %q, want %q…", got[i], w)
				}
			}
		})
	}
}
