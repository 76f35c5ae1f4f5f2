package webchat

import (
	"net"

	"github.com/nanofleet/nanofleet/pkg/config"
)

// Config is the channels.web section.
type Config struct {
	Enabled bool `json:"enabled"`
	// Listen is the gateway's HTTP address for the page, the API and
	// webhooks (default ":8080"); the --listen flag overrides it.
	Listen string `json:"listen,omitempty"`
	// Token grants access; generated at start when empty.
	Token string `json:"token,omitempty"`
	// PublicURL is how users reach the page, for the login link (default
	// http://localhost:<port>).
	PublicURL string `json:"publicUrl,omitempty"`
	// MaxUploadBytes bounds an uploaded file (default 10 MB).
	MaxUploadBytes int64 `json:"maxUploadBytes,omitempty"`
	// SendProgress and SendToolHints override the channels-wide defaults;
	// the page shows tool hints unless one of them says no, since it folds
	// them away.
	SendProgress  *bool `json:"sendProgress,omitempty"`
	SendToolHints *bool `json:"sendToolHints,omitempty"`
}

// DefaultMaxUploadBytes is the default upload limit.
const DefaultMaxUploadBytes = 10 << 20

// Validate reports the first invalid key.
func (c Config) Validate() error {
	const p = "channels.web."
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return config.Invalid(p+"listen", "want host:port, got %q", c.Listen)
		}
	}
	if c.Token != "" && len(c.Token) < 8 {
		return config.Invalid(p+"token", "too short: use at least 8 characters, or none to generate one")
	}
	if c.MaxUploadBytes < 0 {
		return config.Invalid(p+"maxUploadBytes", "must not be negative")
	}
	return nil
}
