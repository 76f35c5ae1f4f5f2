package subagent

import (
	"fmt"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
)

// Config tunes subagents.
type Config struct {
	// MaxPerSession bounds the subagents one session runs at once; the
	// config file's schedule.subagents.maxPerSession, the only field the
	// file sets.
	MaxPerSession int `json:"maxPerSession"`
	// Tools are the names of the tools a subagent may use.
	Tools []string `json:"-"`
	// WaitTimeout bounds how long spawn with wait blocks the parent's
	// turn; after it the child's result is announced instead.
	WaitTimeout time.Duration `json:"-"`
	// StaleAfter is how long a child's record counts as running without
	// a result (a child whose turn was lost stops blocking its slot).
	StaleAfter time.Duration `json:"-"`
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

// Validate reports every invalid field: the one the config file sets by
// its key, those code sets (not the user's to fix) by their names.
func (c Config) Validate() error {
	var p config.Problems
	if c.MaxPerSession < 1 {
		p.Add("schedule.subagents.maxPerSession", "%d, want at least 1", c.MaxPerSession)
	}
	switch {
	case c.WaitTimeout < time.Second:
		p.Join(fmt.Errorf("subagent: wait timeout %s, want at least 1s", c.WaitTimeout))
	case c.StaleAfter < c.WaitTimeout:
		p.Join(fmt.Errorf("subagent: stale after %s is below the wait timeout %s", c.StaleAfter, c.WaitTimeout))
	}
	for _, t := range c.Tools {
		if t == "" || t == "spawn" {
			p.Join(fmt.Errorf("subagent: tool %q is not allowed", t))
		}
	}
	return p.Err()
}
