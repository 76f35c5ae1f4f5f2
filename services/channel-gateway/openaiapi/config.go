package openaiapi

import "github.com/nanofleet/nanofleet/pkg/config"

// Config is the channels.api section.
type Config struct {
	Enabled bool `json:"enabled"`
	// Token is the bearer token clients send as their API key; generated
	// at start when empty.
	Token string `json:"token,omitempty"`
	// Model is the model id the API reports (default "nanofleet").
	Model string `json:"model,omitempty"`
	// TimeoutSeconds bounds one turn (default 600).
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}

// Validate reports every invalid key, joined.
func (c Config) Validate() error {
	const p = "channels.api."
	var probs config.Problems
	if c.Token != "" && len(c.Token) < 8 {
		probs.Add(p+"token", "too short: use at least 8 characters, or none to generate one")
	}
	if c.TimeoutSeconds < 0 || c.TimeoutSeconds > 24*3600 {
		probs.Add(p+"timeoutSeconds", "must be 0..86400, got %d", c.TimeoutSeconds)
	}
	return probs.Err()
}
