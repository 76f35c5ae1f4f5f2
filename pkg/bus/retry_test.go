package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
)

func TestTransient(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"attempt timed out", fmt.Errorf("provision stream X: %w", context.DeadlineExceeded), true},
		{"cancelled", context.Canceled, false},
		{"request timeout", nats.ErrTimeout, true},
		{"no responders", nats.ErrNoResponders, true},
		{"no servers", fmt.Errorf("connect: %w", nats.ErrNoServers), true},
		{"no meta leader", &jetstream.APIError{Code: 503, ErrorCode: 10008}, true},
		{"no peers yet", &jetstream.APIError{Code: 400, ErrorCode: 10005}, true},
		{"stream offline", fmt.Errorf("x: %w", &jetstream.APIError{Code: 500, ErrorCode: 10118}), true},
		{"jetstream not enabled", jetstream.ErrJetStreamNotEnabled, true},
		{"stream without a leader", fmt.Errorf("publish: %w", jetstream.ErrNoStreamResponse), true},
		{"name in use with another config", &jetstream.APIError{Code: 400, ErrorCode: 10058}, false},
		{"invalid config", &jetstream.APIError{Code: 500, ErrorCode: 10052}, false},
		{"replicas without a cluster", &jetstream.APIError{Code: 500, ErrorCode: 10074}, false},
		{"store full for now", &jetstream.APIError{Code: 503, ErrorCode: 10023}, true},
		{"too many requests", &jetstream.APIError{Code: 429, ErrorCode: 10167}, true},
		{"clustering required", &jetstream.APIError{Code: 503, ErrorCode: 10010}, false},
		{"account not found", &jetstream.APIError{Code: 503, ErrorCode: 10035}, false},
		{"unsupported when clustered", fmt.Errorf("x: %w", &jetstream.APIError{Code: 503, ErrorCode: 10036}), false},
		{"stream sequence mismatch", &jetstream.APIError{Code: 503, ErrorCode: 10063}, false},
		{"bad layout", bus.ErrLayout, false},
		{"anything else", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bus.Transient(tt.err); got != tt.want {
				t.Errorf("Transient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestRetry(t *testing.T) {
	fast := backoff.Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond}
	permanent := errors.New("refused")
	tests := []struct {
		name      string
		errs      []error // returned by successive attempts; then nil
		want      error
		attempts  int
		failures  int
		cancelled bool
	}{
		{"succeeds at once", nil, nil, 1, 0, false},
		{"transient failures then success", []error{nats.ErrTimeout, context.DeadlineExceeded}, nil, 3, 2, false},
		{"permanent failure is not retried", []error{nats.ErrTimeout, permanent}, permanent, 2, 1, false},
		{"stops when ctx ends", []error{nats.ErrTimeout, nats.ErrTimeout, nats.ErrTimeout}, context.Canceled, 1, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			attempts, failures := 0, 0
			err := bus.Retry(ctx, fast, func(context.Context) error {
				attempts++
				if attempts <= len(tt.errs) {
					return tt.errs[attempts-1]
				}
				return nil
			}, func(error, time.Duration) {
				failures++
				if tt.cancelled {
					cancel()
				}
			})
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("Retry = %v, want %v", err, tt.want)
			}
			// Given up, the error names the last failure too, on one line.
			if tt.cancelled && (!errors.Is(err, nats.ErrTimeout) || strings.Contains(err.Error(), "\n")) {
				t.Errorf("Retry = %q, want one line matching %v too", err, nats.ErrTimeout)
			}
			if attempts != tt.attempts || failures != tt.failures {
				t.Errorf("%d attempts, %d failures reported; want %d, %d", attempts, failures, tt.attempts, tt.failures)
			}
		})
	}
}

// TestRetryEach: an attempt that is never answered ends at the try's
// bound and is made again; the attempts see the bound as their deadline.
func TestRetryEach(t *testing.T) {
	const try = 50 * time.Millisecond
	fast := backoff.Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	attempts := 0
	err := bus.RetryEach(ctx, fast, try, func(ctx context.Context) error {
		attempts++
		deadline, ok := ctx.Deadline()
		if !ok || time.Until(deadline) > try {
			t.Errorf("attempt %d: deadline in %v, want at most %v", attempts, time.Until(deadline), try)
		}
		if attempts == 1 {
			<-ctx.Done() // lost: never answered
			return ctx.Err()
		}
		return nil
	}, nil)
	if err != nil || attempts != 2 {
		t.Errorf("RetryEach = %v after %d attempts, want nil after 2", err, attempts)
	}
}
