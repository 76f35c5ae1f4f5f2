package gateway

import (
	"errors"
	"fmt"
	"time"
)

// Config tunes delivery.
type Config struct {
	// MaxDeliver is how often a reply is tried before it is dead-lettered,
	// counting attempts that ended without an answer.
	MaxDeliver int
	// AttemptTimeout bounds one delivery attempt.
	AttemptTimeout time.Duration
	// AckWait is how long a reply may go without word from the gateway
	// delivering it before the consumer hands it to another (an attempt
	// sends InProgress every quarter of it). It is also how long a reply
	// waits whose delivery was lost with the consumer leader's node.
	AckWait time.Duration
	// MinBackoff and MaxBackoff bound the wait between retries when the
	// platform gave no retry-after.
	MinBackoff, MaxBackoff time.Duration
	// Parallel is how many replies per channel are delivered at once.
	Parallel int
	// MaxContentBytes bounds an inbound message's text; see
	// [ContentLimit].
	MaxContentBytes int
}

// ContentLimit is the most text an inbound message may have for a model
// whose context window is contextTokens: the window at about 4 bytes a
// token, at most [MaxContentBytes]. A longer message cannot be answered
// whole, so it is refused before it is stored.
func ContentLimit(contextTokens int) int {
	if contextTokens <= 0 {
		return MaxContentBytes
	}
	return min(MaxContentBytes, contextTokens*4)
}

// DefaultConfig returns the production delivery settings.
func DefaultConfig() Config {
	return Config{
		MaxDeliver:     8,
		AttemptTimeout: 60 * time.Second,
		// Not shorter: a consumer elects a new leader in up to 10 s, and
		// an attempt's InProgress sent meanwhile is lost; a reply whose
		// attempt went 20 s without one would be handed to another
		// gateway while the first still sends it, and sent twice.
		AckWait:    20 * time.Second,
		MinBackoff: 500 * time.Millisecond,
		MaxBackoff: 2 * time.Minute,
		Parallel:   8,

		MaxContentBytes: MaxContentBytes,
	}
}

// Validate reports every invalid field. The fields are set by code, not
// by the config file (whose gateway section is nanobot's, refused key by
// key), so the errors name them as Go does.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("gateway: "+format, args...)) }
	if c.MaxDeliver < 1 {
		bad("MaxDeliver must be at least 1, got %d", c.MaxDeliver)
	}
	if c.AttemptTimeout < time.Second {
		bad("AttemptTimeout must be at least 1s, got %s", c.AttemptTimeout)
	}
	if c.AckWait < time.Second {
		bad("AckWait must be at least 1s, got %s", c.AckWait)
	}
	if c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff {
		bad("MinBackoff and MaxBackoff must be 0 < min <= max, got %s, %s", c.MinBackoff, c.MaxBackoff)
	}
	if c.Parallel < 1 {
		bad("Parallel must be at least 1, got %d", c.Parallel)
	}
	if c.MaxContentBytes < 1 || c.MaxContentBytes > MaxContentBytes {
		bad("MaxContentBytes must be 1..%d, got %d", MaxContentBytes, c.MaxContentBytes)
	}
	return errors.Join(errs...)
}
