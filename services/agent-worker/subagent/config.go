package subagent

import (
	"fmt"
	"time"
)

// Config tunes subagents.
type Config struct {
	// MaxPerSession bounds the subagents one session runs at once.
	MaxPerSession int
	// Tools are the names of the tools a subagent may use.
	Tools []string
	// WaitTimeout bounds how long spawn with wait blocks the parent's
	// turn; after it the child's result is announced instead.
	WaitTimeout time.Duration
	// StaleAfter is how long a child's record counts as running without
	// a result (a child whose turn was lost stops blocking its slot).
	StaleAfter time.Duration
}

// DefaultTools is nanobot's subagent tool set: files, exec, web.
var DefaultTools = []string{
	"read_file", "write_file", "edit_file", "list_dir", "glob", "grep", "apply_patch",
	"exec", "web_search", "web_fetch",
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		MaxPerSession: 4,
		Tools:         DefaultTools,
		WaitTimeout:   10 * time.Minute,
		StaleAfter:    time.Hour,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.MaxPerSession < 1:
		return fmt.Errorf("%w: subagents.maxPerSession: %d, want at least 1", ErrInvalidConfig, c.MaxPerSession)
	case c.WaitTimeout < time.Second:
		return fmt.Errorf("%w: subagents.waitTimeout: %s, want at least 1s", ErrInvalidConfig, c.WaitTimeout)
	case c.StaleAfter < c.WaitTimeout:
		return fmt.Errorf("%w: subagents.staleAfter: %s is below waitTimeout %s", ErrInvalidConfig, c.StaleAfter, c.WaitTimeout)
	}
	for _, t := range c.Tools {
		if t == "" || t == "spawn" {
			return fmt.Errorf("%w: subagents.tools: %q is not allowed", ErrInvalidConfig, t)
		}
	}
	return nil
}
