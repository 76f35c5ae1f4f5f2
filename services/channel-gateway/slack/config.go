package slack

import (
	"net/url"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
)

// Group policies.
const (
	GroupMention   = "mention"
	GroupOpen      = "open"
	GroupAllowlist = "allowlist"
)

// Config is the channels.slack section, with nanobot's keys.
type Config struct {
	Enabled bool `json:"enabled"`
	// Mode is "socket", the only mode (accepted for nanobot
	// compatibility).
	Mode string `json:"mode,omitempty"`
	// BotToken (xoxb-…) calls the Web API; AppToken (xapp-…) opens Socket
	// Mode connections.
	BotToken string `json:"botToken"`
	AppToken string `json:"appToken"`
	// AllowFrom lists user ids allowed everywhere; "*" admits everyone.
	AllowFrom []string `json:"allowFrom,omitempty"`
	// GroupPolicy is "mention" (default), "open" or "allowlist".
	GroupPolicy string `json:"groupPolicy,omitempty"`
	// GroupAllowFrom lists the channel ids answered under "allowlist".
	GroupAllowFrom []string `json:"groupAllowFrom,omitempty"`
	// DM configures direct messages.
	DM DM `json:"dm"`
	// ReplyInThread answers in a thread under the asking message (default
	// true).
	ReplyInThread *bool `json:"replyInThread,omitempty"`
	// ReactEmoji is added to a message when it is taken (default "eyes";
	// "none" turns it off).
	ReactEmoji string `json:"reactEmoji,omitempty"`
	// Streaming shows answers while they are written by updating one
	// message (chat.update).
	Streaming bool `json:"streaming,omitempty"`
	// StreamEditInterval is the least time between two updates of a
	// streamed answer, in seconds (default 1.2; chat.update is a tier 3
	// method, about 50 a minute).
	StreamEditInterval float64 `json:"streamEditInterval,omitempty"`
	// SendProgress and SendToolHints override the channels-wide defaults.
	SendProgress  *bool `json:"sendProgress,omitempty"`
	SendToolHints *bool `json:"sendToolHints,omitempty"`
	// APIURL is the Web API base (default https://slack.com/api/).
	APIURL string `json:"apiUrl,omitempty"`
	// MaxMediaBytes bounds a downloaded file (default 20 MB).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
}

// DM configures direct messages, as nanobot's slack.dm.
type DM struct {
	// Enabled answers direct messages (default true).
	Enabled *bool `json:"enabled,omitempty"`
	// Policy for unknown senders: "pairing" (default), "allowlist" or
	// "open".
	Policy access.DMPolicy `json:"policy,omitempty"`
	// AllowFrom adds user ids allowed in direct messages.
	AllowFrom []string `json:"allowFrom,omitempty"`
}

// DefaultAPIURL is Slack's Web API.
const DefaultAPIURL = "https://slack.com/api/"

// Validate reports the first invalid key of an enabled channel.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	const p = "channels.slack."
	switch {
	case c.Mode != "" && c.Mode != "socket":
		return config.Invalid(p+"mode", "only \"socket\" is supported, got %q", c.Mode)
	case !strings.HasPrefix(c.BotToken, "xoxb-"):
		return config.Invalid(p+"botToken", "required: a bot token starting with xoxb-")
	case !strings.HasPrefix(c.AppToken, "xapp-"):
		return config.Invalid(p+"appToken", "required: an app-level token starting with xapp- (Socket Mode)")
	case c.GroupPolicy != "" && c.GroupPolicy != GroupMention && c.GroupPolicy != GroupOpen && c.GroupPolicy != GroupAllowlist:
		return config.Invalid(p+"groupPolicy", "must be mention, open or allowlist, got %q", c.GroupPolicy)
	case c.GroupPolicy == GroupAllowlist && len(c.GroupAllowFrom) == 0:
		return config.Invalid(p+"groupAllowFrom", "must list channel ids when groupPolicy is allowlist")
	case !c.DM.Policy.Valid() || c.DM.Policy == access.DMDisabled:
		return config.Invalid(p+"dm.policy", "must be pairing, allowlist or open, got %q (use dm.enabled to turn DMs off)", c.DM.Policy)
	case c.MaxMediaBytes < 0:
		return config.Invalid(p+"maxMediaBytes", "must not be negative")
	case c.StreamEditInterval < 0 || c.StreamEditInterval > 60:
		return config.Invalid(p+"streamEditInterval", "must be 0..60 seconds, got %g", c.StreamEditInterval)
	}
	if c.APIURL != "" {
		if u, err := url.Parse(c.APIURL); err != nil || u.Scheme == "" || u.Host == "" {
			return config.Invalid(p+"apiUrl", "not an absolute URL: %q", c.APIURL)
		}
	}
	return nil
}

// editInterval is StreamEditInterval as a duration.
func (c Config) editInterval() time.Duration {
	if c.StreamEditInterval == 0 {
		return 1200 * time.Millisecond
	}
	return time.Duration(c.StreamEditInterval * float64(time.Second))
}

func on(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}
