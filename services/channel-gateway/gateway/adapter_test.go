package gateway_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// TestRetryable: what a failed delivery asks for, however deeply its
// DeliveryError is wrapped; an unknown failure is tried again, nil is
// nothing to try.
func TestRetryable(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantRetry bool
		wantAfter time.Duration
	}{
		{"nil", nil, false, 0},
		{"rate limit", gateway.Retry(errors.New("429"), 2*time.Second), true, 2 * time.Second},
		{"rate limit, wrapped", fmt.Errorf("send piece 2: %w", gateway.Retry(errors.New("429"), time.Second)), true, time.Second},
		{"server error", gateway.Retry(errors.New("502"), 0), true, 0},
		{"refused", gateway.Permanent(errors.New("403")), false, 0},
		{"refused, wrapped", fmt.Errorf("upload: %w", gateway.Permanent(errors.New("too large"))), false, 0},
		{"unknown", errors.New("connection reset"), true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			retry, after := gateway.Retryable(tt.err)
			if retry != tt.wantRetry || after != tt.wantAfter {
				t.Errorf("Retryable(%v) = %v, %v; want %v, %v", tt.err, retry, after, tt.wantRetry, tt.wantAfter)
			}
		})
	}
}
