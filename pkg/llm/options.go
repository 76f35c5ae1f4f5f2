package llm

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/observe"
)

// Option configures optional Provider behaviour. Options are validated by
// New.
type Option func(*settings) error

// SleepFunc waits d or until ctx is done, returning ctx.Err() in that case.
type SleepFunc func(ctx context.Context, d time.Duration) error

type settings struct {
	httpClient    *http.Client
	logger        *slog.Logger
	sleep         SleepFunc
	now           func() time.Time
	backoff       backoff.Backoff
	maxRetryAfter time.Duration
	// rateLimitPatience is how long a call keeps retrying 429s before they
	// count as ordinary failures.
	rateLimitPatience time.Duration
}

func defaultSettings() settings {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Keep a connection for every call a worker may have in flight (its
	// turn slots), so that a steady load does not open a connection, and
	// for TLS hosts shake hands, for each call; idle ones close after
	// IdleConnTimeout.
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 1024
	// A request carries the system prompt, the history and a dozen tool
	// schemas, tens of KB: written through the default 4 KB buffer, that
	// is a write call per 4 KB (the all-in-one at 200 sessions: 0.673 →
	// 0.644 ms of CPU per turn with 64 KB, eight interleaved runs each).
	tr.WriteBufferSize = 64 << 10
	return settings{
		httpClient:    &http.Client{Transport: tr},
		logger:        slog.New(slog.DiscardHandler),
		sleep:         backoff.Sleep,
		now:           time.Now,
		backoff:       backoff.Backoff{Min: 500 * time.Millisecond, Max: 20 * time.Second},
		maxRetryAfter: 60 * time.Second,
		// Under the turn's ten minutes, so a turn that cannot get through
		// still answers with the error.
		rateLimitPatience: 3 * time.Minute,
	}
}

// WithHTTPClient sets the HTTP client (proxies, custom TLS). Its Timeout
// should be zero: Config.Timeout bounds each attempt through its context.
func WithHTTPClient(c *http.Client) Option {
	return func(s *settings) error {
		if c == nil {
			return errors.New("WithHTTPClient: nil client")
		}
		s.httpClient = c
		return nil
	}
}

// WithLogger sets the logger for retries and fallbacks (default, and
// nil: discard).
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) error {
		s.logger = observe.OrDiscard(l)
		return nil
	}
}

// WithSleep replaces the wait between retries, so tests need not sleep.
func WithSleep(f SleepFunc) Option {
	return func(s *settings) error {
		if f == nil {
			return errors.New("WithSleep: nil func")
		}
		s.sleep = f
		return nil
	}
}

// WithClock sets the clock used to read Retry-After HTTP dates.
func WithClock(now func() time.Time) Option {
	return func(s *settings) error {
		if now == nil {
			return errors.New("WithClock: nil func")
		}
		s.now = now
		return nil
	}
}

// WithBackoff sets the exponential backoff: the n-th retry (from 0) waits a
// random duration in [d/2, d] where d = min(base<<n, max). Defaults: 500ms,
// 20s.
func WithBackoff(base, maxWait time.Duration) Option {
	return func(s *settings) error {
		if base <= 0 || maxWait < base {
			return errors.New("WithBackoff: need 0 < base <= max")
		}
		s.backoff = backoff.Backoff{Min: base, Max: maxWait}
		return nil
	}
}

// WithMaxRetryAfter sets the longest Retry-After honoured (default 60s). A
// provider asking for more is not retried: the next fallback model is tried
// instead.
func WithMaxRetryAfter(d time.Duration) Option {
	return func(s *settings) error {
		if d < 0 {
			return errors.New("WithMaxRetryAfter: negative duration")
		}
		s.maxRetryAfter = d
		return nil
	}
}

// WithRateLimitPatience sets how long one call keeps retrying 429 answers
// (the waits they asked for, summed) before they count against
// Config.MaxRetries like any other failure (default 3 minutes).
func WithRateLimitPatience(d time.Duration) Option {
	return func(s *settings) error {
		if d < 0 {
			return errors.New("WithRateLimitPatience: negative duration")
		}
		s.rateLimitPatience = d
		return nil
	}
}
