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

// Validate reports the first invalid key.
func (c Config) Validate() error {
	const p = "channels.api."
	switch {
	case c.Token != "" && len(c.Token) < 8:
		return config.Invalid(p+"token", "too short: use at least 8 characters, or none to generate one")
	case c.TimeoutSeconds < 0 || c.TimeoutSeconds > 24*3600:
		return config.Invalid(p+"timeoutSeconds", "must be 0..86400, got %d", c.TimeoutSeconds)
	}
	return nil
}
