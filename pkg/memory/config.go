package memory

import (
	"encoding/json"
	"errors"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/profile"
)

// Config is the config file's "memory" section as the worker reads it.
// The memory-consolidator's own settings sit in the same section and are
// kept raw here.
type Config struct {
	// Agent whose memory this is; default "default".
	Agent string `json:"agent,omitempty"`
	// Scope is "agent" (default), "user" or "session".
	Scope string `json:"scope,omitempty"`
	// GroupScope is the scope of group chats when Scope is "user":
	// "session" (default) or "agent".
	GroupScope string `json:"groupScope,omitempty"`
	// ConsolidateShare is the share of the prompt budget unconsolidated
	// history may take before its oldest turns are consolidated, until
	// about half of that share is free. Default 0.5.
	ConsolidateShare float64 `json:"consolidateShare,omitempty"`
	// RecentTokens bounds the recent history entries shown in the prompt
	// beside MEMORY.md. Default 1000; 0 keeps the default, negative shows
	// none.
	RecentTokens int `json:"recentTokens,omitempty"`
	// SearchScan bounds how many history entries one memory_search reads.
	// Default 20000.
	SearchScan int `json:"searchScan,omitempty"`

	// Sections owned by the memory-consolidator, decoded by it.
	Consolidator json.RawMessage `json:"consolidator,omitempty"`
	Dream        json.RawMessage `json:"dream,omitempty"`
	Sync         json.RawMessage `json:"sync,omitempty"`
}

// DefaultConfig returns nanobot's behaviour: one memory per agent.
func DefaultConfig() Config {
	return Config{
		Agent:            profile.DefaultAgent,
		Scope:            KindAgent,
		GroupScope:       KindSession,
		ConsolidateShare: 0.5,
		RecentTokens:     1000,
		SearchScan:       20000,
	}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Agent == "" {
		c.Agent = d.Agent
	}
	if c.Scope == "" {
		c.Scope = d.Scope
	}
	if c.GroupScope == "" {
		c.GroupScope = d.GroupScope
	}
	if c.ConsolidateShare == 0 {
		c.ConsolidateShare = d.ConsolidateShare
	}
	if c.RecentTokens == 0 {
		c.RecentTokens = d.RecentTokens
	}
	if c.SearchScan == 0 {
		c.SearchScan = d.SearchScan
	}
	return c
}

// Validate reports every invalid key, named as in the config file,
// joined.
func (c Config) Validate() error {
	c = c.withDefaults()
	var p config.Problems
	if c.Scope != KindAgent && c.Scope != KindUser && c.Scope != KindSession {
		p.Add("memory.scope", "must be agent, user or session, got %q", c.Scope)
	}
	if c.GroupScope != KindAgent && c.GroupScope != KindSession {
		p.Add("memory.groupScope", "must be session or agent, got %q", c.GroupScope)
	}
	if c.ConsolidateShare <= 0 || c.ConsolidateShare > 1 {
		p.Add("memory.consolidateShare", "must be in (0, 1], got %g", c.ConsolidateShare)
	}
	if c.SearchScan < 0 {
		p.Add("memory.searchScan", "must not be negative, got %d", c.SearchScan)
	}
	return p.Err()
}

// ConfigFrom reads the config file's "memory" section over the defaults
// and validates it, what decoded past a refused key too.
func ConfigFrom(file *config.File) (Config, error) {
	c := DefaultConfig()
	err := file.Section("memory", &c)
	return c, errors.Join(err, c.Validate())
}
