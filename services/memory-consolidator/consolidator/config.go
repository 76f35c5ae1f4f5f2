package consolidator

import (
	"fmt"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
)

// Config tunes a consolidator. The fields with a json tag are the config
// file's memory.consolidator section, decoded straight into it; the rest
// are set by code.
type Config struct {
	// ID names the consolidator in leases and logs.
	ID string `json:"-"`
	// Model overrides the provider's default model when set
	// (agents.defaults.model).
	Model string `json:"model,omitempty"`
	// MaxTokens bounds the model's answer.
	MaxTokens int `json:"-"`
	// Slots is how many requests this consolidator works on at once and
	// how many model calls it makes at once; a request only waiting for
	// a batch gives its slot back (see the package doc).
	Slots int `json:"slots,omitempty"`
	// AckWait is how long a request may go without InProgress before it
	// is redelivered.
	AckWait config.Seconds `json:"ackWaitSeconds,omitempty"`
	// LeaseWait is how long a request waits for a session, or a memory
	// document, another consolidation holds before it is put back.
	LeaseWait time.Duration `json:"-"`
	// MaxDeliveries is how often a request may be delivered before it is
	// dead-lettered.
	MaxDeliveries int `json:"maxDeliveries,omitempty"`
	// MaxRequestBytes is the largest request accepted.
	MaxRequestBytes int `json:"maxRequestBytes,omitempty"`
	// ChunkTokens bounds the turns sent to the model at once; a larger
	// range is consolidated in several entries.
	ChunkTokens int `json:"chunkTokens,omitempty"`
	// BatchMax bounds the rounds of one process that one model call
	// consolidates into a memory document together (group commit).
	BatchMax int `json:"batchMax,omitempty"`
	// RecentEntries and RecentChars bound the entries kept in a MemoryDoc
	// for the prompt.
	RecentEntries, RecentChars int `json:"-"`
	// ToolChars clips tool results in transcripts.
	ToolChars int `json:"-"`
	// AppliedTTL is how long applied markers are kept.
	AppliedTTL time.Duration `json:"-"`
	// ShutdownGrace is how long requests in progress may take to finish
	// once Run is told to stop.
	ShutdownGrace time.Duration `json:"-"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		MaxTokens:       4096,
		Slots:           4,
		AckWait:         config.Seconds(time.Minute),
		LeaseWait:       time.Minute,
		MaxDeliveries:   10,
		MaxRequestBytes: 16 << 10,
		ChunkTokens:     24000,
		BatchMax:        8,
		RecentEntries:   20,
		RecentChars:     2000,
		ToolChars:       500,
		AppliedTTL:      24 * time.Hour,
		ShutdownGrace:   30 * time.Second,
	}
}

// Validate reports every invalid key, joined; a field that code sets is
// a plain error.
func (c Config) Validate() error {
	switch {
	case c.ID == "":
		return fmt.Errorf("consolidator: id must be set")
	case c.RecentEntries < 0 || c.RecentChars < 0 || c.ToolChars < 0:
		return fmt.Errorf("consolidator: recent entries and chars must not be negative")
	case c.ShutdownGrace < 0:
		return fmt.Errorf("consolidator: shutdown grace must not be negative")
	case c.AppliedTTL < time.Minute:
		return fmt.Errorf("consolidator: applied markers must be kept at least a minute")
	}
	var p config.Problems
	if c.Slots < 1 {
		p.Add("memory.consolidator.slots", "must be at least 1, got %d", c.Slots)
	}
	if time.Duration(c.AckWait) < time.Second {
		p.Add("memory.consolidator.ackWaitSeconds", "must be at least 1, got %s", c.AckWait)
	}
	if c.MaxDeliveries < 1 {
		p.Add("memory.consolidator.maxDeliveries", "must be at least 1, got %d", c.MaxDeliveries)
	}
	if c.MaxRequestBytes < 64 {
		p.Add("memory.consolidator.maxRequestBytes", "must be at least 64, got %d", c.MaxRequestBytes)
	}
	if c.ChunkTokens < 100 {
		p.Add("memory.consolidator.chunkTokens", "must be at least 100, got %d", c.ChunkTokens)
	}
	if c.BatchMax < 1 {
		p.Add("memory.consolidator.batchMax", "must be at least 1, got %d", c.BatchMax)
	}
	return p.Err()
}
