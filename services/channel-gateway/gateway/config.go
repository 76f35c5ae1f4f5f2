package gateway

import (
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

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.MaxDeliver < 1:
		return fmt.Errorf("gateway.maxDeliver: must be at least 1, got %d", c.MaxDeliver)
	case c.AttemptTimeout < time.Second:
		return fmt.Errorf("gateway.attemptTimeout: must be at least 1s, got %s", c.AttemptTimeout)
	case c.AckWait < time.Second:
		return fmt.Errorf("gateway.ackWait: must be at least 1s, got %s", c.AckWait)
	case c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff:
		return fmt.Errorf("gateway backoff: want 0 < min <= max, got %s, %s", c.MinBackoff, c.MaxBackoff)
	case c.Parallel < 1:
		return fmt.Errorf("gateway.parallel: must be at least 1, got %d", c.Parallel)
	case c.MaxContentBytes < 1 || c.MaxContentBytes > MaxContentBytes:
		return fmt.Errorf("gateway.maxContentBytes: must be 1..%d, got %d", MaxContentBytes, c.MaxContentBytes)
	}
	return nil
}
