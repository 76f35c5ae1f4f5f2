package dingtalk

import (
	"net/url"
	"strings"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
)

// Group policies.
const (
	// GroupMention answers in groups only when the bot is mentioned
	// (default; DingTalk sends a robot little else).
	GroupMention = "mention"
	// GroupOpen answers every group message the robot receives.
	GroupOpen = "open"
	// GroupAllowlist answers the groups in groupAllowFrom.
	GroupAllowlist = "allowlist"
)

// Config is the channels.dingtalk section, with nanobot's keys.
type Config struct {
	Enabled bool `json:"enabled"`
	// ClientID (AppKey) and ClientSecret (AppSecret) of the robot's app.
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
	// RobotCode identifies the robot to the send API (default: the
	// client id, as for an internal app's robot).
	RobotCode string `json:"robotCode,omitempty"`
	// AllowFrom lists staff ids; "*" admits everyone.
	AllowFrom []string `json:"allowFrom,omitempty"`
	// GroupPolicy is "mention" (default), "open" or "allowlist".
	GroupPolicy string `json:"groupPolicy,omitempty"`
	// GroupAllowFrom lists the conversation ids (cid…) answered under
	// "allowlist".
	GroupAllowFrom []string `json:"groupAllowFrom,omitempty"`
	// DMPolicy for unknown senders in one-to-one chats: "pairing"
	// (default), "allowlist", "open" or "disabled".
	DMPolicy access.DMPolicy `json:"dmPolicy,omitempty"`
	// Streaming is accepted for nanobot compatibility; answers are sent
	// whole.
	Streaming bool `json:"streaming,omitempty"`
	// SendProgress and SendToolHints override the channels-wide defaults.
	SendProgress  *bool `json:"sendProgress,omitempty"`
	SendToolHints *bool `json:"sendToolHints,omitempty"`
	// APIURL is the open API (default https://api.dingtalk.com), for
	// tests and proxies.
	APIURL string `json:"apiUrl,omitempty"`
	// MaxMediaBytes bounds a downloaded picture or file (default 20 MB).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
}

// DefaultAPIURL is DingTalk's open API.
const DefaultAPIURL = "https://api.dingtalk.com"

// Validate reports the first invalid key of an enabled channel.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	const p = "channels.dingtalk."
	switch {
	case strings.TrimSpace(c.ClientID) == "":
		return config.Invalid(p+"clientId", "required when the channel is enabled")
	case strings.TrimSpace(c.ClientSecret) == "":
		return config.Invalid(p+"clientSecret", "required when the channel is enabled")
	case c.GroupPolicy != "" && c.GroupPolicy != GroupMention && c.GroupPolicy != GroupOpen && c.GroupPolicy != GroupAllowlist:
		return config.Invalid(p+"groupPolicy", "must be mention, open or allowlist, got %q", c.GroupPolicy)
	case c.GroupPolicy == GroupAllowlist && len(c.GroupAllowFrom) == 0:
		return config.Invalid(p+"groupAllowFrom", "must list conversation ids when groupPolicy is allowlist")
	case !c.DMPolicy.Valid():
		return config.Invalid(p+"dmPolicy", "must be pairing, allowlist, open or disabled, got %q", c.DMPolicy)
	case c.MaxMediaBytes < 0:
		return config.Invalid(p+"maxMediaBytes", "must not be negative")
	}
	if c.APIURL != "" {
		if u, err := url.Parse(c.APIURL); err != nil || u.Scheme == "" || u.Host == "" {
			return config.Invalid(p+"apiUrl", "not an absolute URL: %q", c.APIURL)
		}
	}
	return nil
}

func (c Config) apiURL() string {
	if c.APIURL != "" {
		return strings.TrimRight(c.APIURL, "/")
	}
	return DefaultAPIURL
}

func (c Config) robotCode() string {
	if c.RobotCode != "" {
		return c.RobotCode
	}
	return c.ClientID
}

func on(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}
