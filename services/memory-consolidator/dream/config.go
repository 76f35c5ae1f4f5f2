package dream

import (
	"errors"
	"fmt"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
)

// Config tunes Dream. The fields with a json tag are the config file's
// memory.dream section, decoded straight into it; the rest are set by
// code.
type Config struct {
	// ID names this consolidator in leases.
	ID string `json:"-"`
	// Agent whose memory Dream refines.
	Agent string `json:"-"`
	// Every is the interval, a Go duration ("2h", "90m") of at least 1s;
	// ignored when Cron is set.
	Every string `json:"every,omitempty"`
	// Cron is a 6-field cron expression (seconds first) or @hourly,
	// @daily, …; TimeZone is its IANA zone.
	Cron     string `json:"cron,omitempty"`
	TimeZone string `json:"timeZone,omitempty"`
	// MaxEntries and MaxInputChars bound the entries one run reads.
	MaxEntries    int `json:"maxEntries,omitempty"`
	MaxInputChars int `json:"-"`
	// MaxSkillChars bounds the skills shown to the model.
	MaxSkillChars int `json:"-"`
	// Model overrides the provider's default model; MaxTokens bounds the
	// answer.
	Model     string `json:"model,omitempty"`
	MaxTokens int    `json:"-"`
	// AckWait is how long a fire may go without InProgress.
	AckWait time.Duration `json:"-"`
}

// DefaultConfig runs Dream every two hours, as nanobot does.
func DefaultConfig() Config {
	return Config{
		Agent: "default", Every: "2h", MaxEntries: 200, MaxInputChars: 60000,
		MaxSkillChars: 20000, MaxTokens: 8192, AckWait: 5 * time.Minute,
	}
}

// interval is Every as a duration; 0 when it does not parse.
func (c Config) interval() time.Duration {
	d, _ := time.ParseDuration(c.Every)
	return d
}

// Validate reports every invalid key, joined; a field that code sets is
// a plain error.
func (c Config) Validate() error {
	switch {
	case c.ID == "" || c.Agent == "":
		return errors.New("dream: id and agent must be set")
	case c.MaxInputChars < 1000:
		return fmt.Errorf("dream: maxInputChars must be at least 1000, got %d", c.MaxInputChars)
	case c.AckWait < time.Second:
		return fmt.Errorf("dream: ackWait must be at least 1s, got %s", c.AckWait)
	}
	var p config.Problems
	_, everyErr := time.ParseDuration(c.Every)
	switch {
	case c.Every != "" && everyErr != nil:
		p.Add("memory.dream.every", "%w", everyErr)
	case c.Cron == "" && c.interval() < time.Second:
		p.Add("memory.dream.every", "must be at least 1s, got %s", c.interval())
	}
	if c.TimeZone != "" {
		if c.Cron == "" {
			p.Add("memory.dream.timeZone", "only with a cron schedule")
		} else if _, err := time.LoadLocation(c.TimeZone); err != nil {
			p.Add("memory.dream.timeZone", "%w", err)
		}
	}
	if c.MaxEntries < 1 {
		p.Add("memory.dream.maxEntries", "must be at least 1, got %d", c.MaxEntries)
	}
	return p.Err()
}

// Pattern is the schedule's Nats-Schedule value.
func (c Config) Pattern() string {
	if c.Cron != "" {
		return c.Cron
	}
	return "@every " + c.interval().String()
}
