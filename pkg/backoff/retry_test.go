package backoff_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/backoff"
)

// TestRetry: a failure Again accepts is tried again, after Wait's wait
// (none without Wait), Failed told of it and the wait; any other is
// returned as it is; the zero Retry tries once. (Try's bound: bus's
// TestRetryEach.)
func TestRetry(t *testing.T) {
	errPasses, errFinal := errors.New("passes"), errors.New("final")
	passes := func(err error) bool { return errors.Is(err, errPasses) }
	const wait = 5 * time.Millisecond
	tests := []struct {
		name     string
		r        backoff.Retry
		errs     []error // returned by successive tries; then nil
		want     error
		tries    int
		failures int
		wait     time.Duration // told to Failed
	}{
		{"succeeds at once", backoff.Retry{Again: passes}, nil, nil, 1, 0, 0},
		{"again until it succeeds", backoff.Retry{Again: passes}, []error{errPasses, errPasses}, nil, 3, 2, 0},
		{"waits between tries", backoff.Retry{Again: passes, Wait: func(int) time.Duration { return wait }}, []error{errPasses, errPasses}, nil, 3, 2, wait},
		{"a final failure is not tried again", backoff.Retry{Again: passes}, []error{errPasses, errFinal}, errFinal, 2, 1, 0},
		{"zero value tries once", backoff.Retry{}, []error{errPasses}, errPasses, 1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tries, failures := 0, 0
			tt.r.Failed = func(err error, wait time.Duration) {
				failures++
				if !errors.Is(err, errPasses) || wait != tt.wait {
					t.Errorf("Failed told of %v and a wait of %v, want %v and %v", err, wait, errPasses, tt.wait)
				}
			}
			err := tt.r.Do(t.Context(), func(context.Context) error {
				tries++
				if tries <= len(tt.errs) {
					return tt.errs[tries-1]
				}
				return nil
			})
			if err != tt.want { // returned as it is
				t.Errorf("Do = %v, want %v", err, tt.want)
			}
			if tries != tt.tries || failures != tt.failures {
				t.Errorf("%d tries, %d failures told; want %d, %d", tries, failures, tt.tries, tt.failures)
			}
		})
	}
}

// TestRetryGivesUp: when ctx ends, during a try or a wait, the error
// matches ctx's and the last failure both, on one line.
func TestRetryGivesUp(t *testing.T) {
	errPasses := errors.New("passes")
	always := func(error) bool { return true }
	tests := []struct {
		name string
		wait time.Duration
		ctx  func() (context.Context, context.CancelFunc)
		want error
		text string
	}{
		{"deadline during the waits", time.Hour, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 20*time.Millisecond)
		}, context.DeadlineExceeded, "context deadline exceeded after 1 try: passes"},
		{"cancelled", 0, func() (context.Context, context.CancelFunc) {
			return context.WithCancel(t.Context())
		}, context.Canceled, "context canceled after 3 tries, the last: passes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			tries := 0
			err := backoff.Retry{Again: always, Wait: func(int) time.Duration { return tt.wait }}.Do(ctx, func(context.Context) error {
				tries++
				if tries == 3 {
					cancel()
				}
				return errPasses
			})
			if !errors.Is(err, tt.want) || !errors.Is(err, errPasses) {
				t.Errorf("Do = %v, want it to match %v and %v", err, tt.want, errPasses)
			}
			if err == nil || err.Error() != tt.text || strings.Contains(err.Error(), "\n") {
				t.Errorf("Do = %q, want %q", err, tt.text)
			}
		})
	}
}
