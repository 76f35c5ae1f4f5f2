package webchat

import (
	"fmt"
	"net/http"
	"net/url"

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
	// MaxConnections bounds the connections the gateway's HTTP listener
	// (the page, the API, webhooks) holds open at once; one more is
	// answered 503. Default half the process's file descriptors, at most
	// 10,000: the rest of the process needs the other half.
	MaxConnections int `json:"maxConnections,omitempty"`
	// AllowedOrigins are other origins ("https://chat.example.com") whose
	// pages may send state-changing requests with the login cookie. The
	// page's own origin and publicUrl's are always allowed.
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`
	// SendProgress and SendToolHints override the channels-wide defaults;
	// the page shows tool hints unless one of them says no, since it folds
	// them away.
	SendProgress  *bool `json:"sendProgress,omitempty"`
	SendToolHints *bool `json:"sendToolHints,omitempty"`
}

// DefaultMaxUploadBytes is the default upload limit.
const DefaultMaxUploadBytes = 10 << 20

// Validate reports every invalid key, joined.
func (c Config) Validate() error {
	const p = "channels.web."
	var probs config.Problems
	if c.Listen != "" {
		if !config.ListenAddr(c.Listen) {
			probs.Add(p+"listen", "want host:port (\"127.0.0.1:8080\", \":8080\"), got %q", c.Listen)
		}
	}
	if c.Token != "" && len(c.Token) < 8 {
		probs.Add(p+"token", "too short: use at least 8 characters, or none to generate one")
	}
	if c.MaxUploadBytes < 0 {
		probs.Add(p+"maxUploadBytes", "must not be negative")
	}
	if c.MaxConnections < 0 {
		probs.Add(p+"maxConnections", "must not be negative (0: the default)")
	}
	_, err := c.crossOrigin()
	probs.Join(err)
	return probs.Err()
}

// originHosts are the hosts of the allowed origins and publicUrl, which
// the WebSocket accepts besides the request's own host. Validate has
// checked them.
func (c Config) originHosts() []string {
	var hosts []string
	for _, o := range append(append([]string(nil), c.AllowedOrigins...), c.PublicURL) {
		if u, err := url.Parse(o); err == nil && u.Host != "" {
			hosts = append(hosts, u.Host)
		}
	}
	return hosts
}

// crossOrigin is the CSRF guard of the page's state-changing requests:
// a browser request from another origin (Sec-Fetch-Site, else Origin
// against Host) is refused unless the origin is publicUrl's or allowed.
// Its error names every origin it cannot take.
func (c Config) crossOrigin() (*http.CrossOriginProtection, error) {
	cop := http.NewCrossOriginProtection()
	var probs config.Problems
	for i, o := range c.AllowedOrigins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			probs.Add(fmt.Sprintf("channels.web.allowedOrigins[%d]", i), "%w", err)
		}
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			probs.Add("channels.web.publicUrl", "want an absolute URL like https://chat.example.com, got %q", c.PublicURL)
		} else if err := cop.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
			probs.Add("channels.web.publicUrl", "%w", err)
		}
	}
	if err := probs.Err(); err != nil {
		return nil, err
	}
	return cop, nil
}
