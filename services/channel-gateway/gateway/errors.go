package gateway

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Refusals: a message the fleet will not take, for a reason the sender
// must hear at once. Neither is worth sending again unchanged.
var (
	// ErrStorageFull is a message refused because the fleet's store has
	// no room for it; nothing was stored.
	ErrStorageFull = errors.New("storage full")
	// ErrTooLarge is a message larger than the fleet accepts.
	ErrTooLarge = errors.New("message too large")
)

// MaxContentBytes is the most text an inbound message may have whatever
// the config: about 250,000 tokens, and room for a turn record (the
// message, tool results and the answer) below the streams' 4 MiB message
// size.
const MaxContentBytes = 1 << 20

// TooLargeError is a message refused for its size.
type TooLargeError struct {
	Size, Limit int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("message too large: %d bytes of text, at most %d", e.Size, e.Limit)
}

func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// storageFull marks the reason the fleet's store guard gave as
// ErrStorageFull, saying "storage full" once (the guard's own errors
// start with it).
type storageFull struct{ error }

func (e storageFull) Error() string {
	if msg := e.error.Error(); strings.HasPrefix(msg, ErrStorageFull.Error()) {
		return msg
	}
	return ErrStorageFull.Error() + ": " + e.error.Error()
}
func (e storageFull) Is(target error) bool { return target == ErrStorageFull }
func (e storageFull) Unwrap() error        { return e.error }

// RefusalText is what a chat user is told when err is a refusal, or "".
func RefusalText(err error) string {
	switch {
	case errors.Is(err, ErrStorageFull):
		return "⚠️ Storage full: the fleet has no room to store your message, so it was not received. Please try again once the operator has freed space."
	case errors.Is(err, ErrTooLarge):
		return "⚠️ Message too large: it is longer than the fleet can take (the model's context window or its storage). Please send a shorter message, or attach the content as a file."
	}
	return ""
}

// DeliveryError tells the gateway what to do about a failed delivery.
type DeliveryError struct {
	// Retryable failures (rate limits, 5xx, network) are tried again.
	Retryable bool
	// RetryAfter is the platform's requested wait, when it gave one.
	RetryAfter time.Duration
	Err        error
}

func (e *DeliveryError) Error() string {
	kind := "permanent"
	if e.Retryable {
		kind = "retryable"
	}
	return fmt.Sprintf("delivery failed (%s): %v", kind, e.Err)
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// Retry wraps err as a retryable delivery error.
func Retry(err error, after time.Duration) error {
	return &DeliveryError{Retryable: true, RetryAfter: after, Err: err}
}

// Permanent wraps err as a delivery error not worth retrying.
func Permanent(err error) error { return &DeliveryError{Err: err} }

// Retryable reports whether err, a failed delivery, asks for a retry, and
// after how long (0: the caller's own backoff). Errors that are not
// DeliveryErrors are treated as retryable: an unknown failure is more
// likely transient than fatal. nil asks for nothing.
func Retryable(err error) (retry bool, after time.Duration) {
	if err == nil {
		return false, 0
	}
	var de *DeliveryError
	if errors.As(err, &de) {
		return de.Retryable, de.RetryAfter
	}
	return true, 0
}
