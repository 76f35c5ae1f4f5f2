package llm

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrRateLimited matches an *APIError with status 429.
	ErrRateLimited = errors.New("llm: rate limited")
	// ErrInvalidConfig matches every *ConfigError returned by Config.Validate.
	ErrInvalidConfig = errors.New("llm: invalid config")
	// ErrInvalidRequest reports a Request that cannot be sent (no messages,
	// a tool whose parameters are not JSON, ...). It is never retried.
	ErrInvalidRequest = errors.New("llm: invalid request")
	// ErrNoChoices reports a successful response without any choice in it.
	ErrNoChoices = errors.New("llm: response has no choices")
	// ErrStreamInterrupted reports a stream that failed after OnDelta had
	// already been called. Such a call is neither retried nor sent to a
	// fallback model, because the caller has seen part of the answer.
	ErrStreamInterrupted = errors.New("llm: stream interrupted after partial output")
	// ErrResponseTooLarge reports a response body over MaxResponseBytes.
	// It is not retried: the same request would most likely get as much.
	ErrResponseTooLarge = errors.New("llm: response too large")
)

// MaxResponseBytes bounds the body of one model response, a stream's
// whole included. A turn stores at most a few MiB (the bus's largest
// message), so a larger answer could never be kept; read whole, a 200 MB
// answer took an all-in-one to 1.1 GB resident.
const MaxResponseBytes = 32 << 20

// APIError is an HTTP error answered by the provider.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Message is the provider's error message (or the start of the body).
	Message string
	// RetryAfter is the wait the provider asked for with Retry-After (or
	// retry-after-ms); zero when it sent none. See HasRetryAfter.
	RetryAfter time.Duration
	// Err is the underlying go-openai error.
	Err error

	retryAfterSet bool
}

// Error implements error.
func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("llm: api error %d: %s", e.Status, msg)
}

// Unwrap returns the underlying go-openai error.
func (e *APIError) Unwrap() error { return e.Err }

// Is reports whether e matches target: ErrRateLimited matches status 429.
func (e *APIError) Is(target error) bool {
	return target == ErrRateLimited && e.Status == http.StatusTooManyRequests
}

// HasRetryAfter reports whether the provider sent a Retry-After header
// (possibly "0").
func (e *APIError) HasRetryAfter() bool { return e.retryAfterSet }

// Temporary reports whether the status is worth retrying: 408, 409, 429
// and every 5xx.
func (e *APIError) Temporary() bool {
	switch {
	case e.Status == http.StatusRequestTimeout,
		e.Status == http.StatusConflict,
		e.Status == http.StatusTooManyRequests,
		e.Status >= 500:
		return true
	}
	return false
}

// ConfigError names the Config field that failed validation.
type ConfigError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("llm: config: %s: %s", e.Field, e.Reason)
}

// Is makes every ConfigError match ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// providerReason keeps the ConfigError in the chain but prints only its
// reason, the key being named already.
type providerReason struct{ *ConfigError }

func (r providerReason) Error() string { return r.Reason }
func (r providerReason) Unwrap() error { return r.ConfigError }
