package dashboard

import (
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
)

// Config tunes the dashboard; the zero value is ready to use.
type Config struct {
	// Interval between the snapshots pushed to an open page (default 2s,
	// at least 250ms).
	Interval time.Duration
	// DiscoverWait is how long a snapshot waits for the fleet's services
	// to answer discovery (default 300ms; less than Interval).
	DiscoverWait time.Duration
	// RecentTurns and DeadLetters are how many of each the page lists
	// (default 20 each, at most 500).
	RecentTurns, DeadLetters int
}

// Defaults of [Config].
const (
	DefaultInterval     = 2 * time.Second
	DefaultDiscoverWait = 300 * time.Millisecond
	DefaultRecent       = 20
	maxRecent           = 500
)

// withDefaults fills the unset fields.
func (c Config) withDefaults() Config {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.DiscoverWait == 0 {
		c.DiscoverWait = min(DefaultDiscoverWait, c.Interval/2)
	}
	if c.RecentTurns == 0 {
		c.RecentTurns = DefaultRecent
	}
	if c.DeadLetters == 0 {
		c.DeadLetters = DefaultRecent
	}
	return c
}

// Validate reports the first invalid field, after defaults are applied.
func (c Config) Validate() error {
	const p = "dashboard."
	c = c.withDefaults()
	switch {
	case c.Interval < 250*time.Millisecond:
		return config.Invalid(p+"interval", "%s is below 250ms", c.Interval)
	case c.DiscoverWait < 0 || c.DiscoverWait >= c.Interval:
		return config.Invalid(p+"discoverWait", "%s: want more than 0 and less than the interval (%s)", c.DiscoverWait, c.Interval)
	case c.RecentTurns < 0 || c.RecentTurns > maxRecent:
		return config.Invalid(p+"recentTurns", "%d not in 1..%d", c.RecentTurns, maxRecent)
	case c.DeadLetters < 0 || c.DeadLetters > maxRecent:
		return config.Invalid(p+"deadLetters", "%d not in 1..%d", c.DeadLetters, maxRecent)
	}
	return nil
}
