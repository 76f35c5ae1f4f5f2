package telegram

import (
	"errors"
	"testing"
	"time"

	tgbot "github.com/go-telegram/bot"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// A retry_after too long for a time.Duration wrapped around to a negative
// wait: a delivery then took the gateway's own backoff, and polling asked
// again at once, however long Telegram asked to wait.
const pastADuration = int(config.MaxSeconds + 1)

// held is what such a wait is held at instead.
var held = config.SecondsDuration(config.MaxSeconds)

func TestClassify(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		retry bool
		after time.Duration
	}{
		{"rate limited", &tgbot.TooManyRequestsError{RetryAfter: 3}, true, 3 * time.Second},
		{"rate limited past a Duration", &tgbot.TooManyRequestsError{RetryAfter: pastADuration}, true, held},
		{"bad request", tgbot.ErrorBadRequest, false, 0},
		{"unknown", errors.New("connection reset"), true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			retry, after := gateway.Retryable(classify(tt.err))
			if retry != tt.retry || after != tt.after {
				t.Errorf("Retryable = %v, %v; want %v, %v", retry, after, tt.retry, tt.after)
			}
		})
	}
}

func TestPollWait(t *testing.T) {
	pace := backoff.Backoff{Min: 200 * time.Millisecond, Max: 5 * time.Second}
	tests := []struct {
		name   string
		err    error
		failed int
		lo, hi time.Duration // pace's jitter: half its delay to all of it
	}{
		{"retry_after", &apiError{Code: 429, RetryAfter: 7}, 3, 7 * time.Second, 7 * time.Second},
		{"retry_after past a Duration", &apiError{Code: 429, RetryAfter: pastADuration}, 0, held, held},
		{"no retry_after", &apiError{Code: 502}, 0, pace.Delay(0) / 2, pace.Delay(0)},
		{"network", errors.New("connection reset"), 4, pace.Delay(4) / 2, pace.Delay(4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pollWait(tt.err, pace, tt.failed); got < tt.lo || got > tt.hi {
				t.Errorf("pollWait = %v, want %v..%v", got, tt.lo, tt.hi)
			}
		})
	}
}
