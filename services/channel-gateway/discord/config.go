package discord

import (
	"net/url"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
)

// Group policies.
const (
	// GroupMention answers in guild channels only when the bot is
	// mentioned or replied to.
	GroupMention = "mention"
	// GroupOpen answers every message in guild channels.
	GroupOpen = "open"
	// GroupAllowlist answers every message in the channels (or guilds)
	// listed in groupAllowFrom, and nothing elsewhere.
	GroupAllowlist = "allowlist"
)

// Config is the channels.discord section, with nanobot's keys.
type Config struct {
	Enabled bool `json:"enabled"`
	// Token is the bot token from the Discord developer portal.
	Token string `json:"token"`
	// AllowFrom lists user ids or user names; "*" admits everyone.
	AllowFrom []string `json:"allowFrom,omitempty"`
	// GroupPolicy is "mention" (default), "open" or "allowlist".
	GroupPolicy string `json:"groupPolicy,omitempty"`
	// GroupAllowFrom lists the channel or guild ids answered under
	// "allowlist".
	GroupAllowFrom []string `json:"groupAllowFrom,omitempty"`
	// DMPolicy for unknown senders in direct messages: "pairing"
	// (default), "allowlist", "open" or "disabled".
	DMPolicy access.DMPolicy `json:"dmPolicy,omitempty"`
	// Streaming shows answers while they are written by editing one
	// message.
	Streaming bool `json:"streaming,omitempty"`
	// StreamEditInterval is the least time between two edits of a
	// streamed answer, in seconds (default 1; Discord allows about five
	// edits per five seconds per channel).
	StreamEditInterval float64 `json:"streamEditInterval,omitempty"`
	// SendProgress and SendToolHints override the channels-wide defaults.
	SendProgress  *bool `json:"sendProgress,omitempty"`
	SendToolHints *bool `json:"sendToolHints,omitempty"`
	// ReplyToMessage makes answers reply to the message that asked
	// (default true).
	ReplyToMessage *bool `json:"replyToMessage,omitempty"`
	// APIBase is the REST API base (default https://discord.com/api/v10).
	APIBase string `json:"apiBase,omitempty"`
	// GatewayURL is the gateway WebSocket URL (nanobot's gatewayUrl);
	// by default it is asked from GET /gateway/bot.
	GatewayURL string `json:"gatewayUrl,omitempty"`
	// Intents is accepted for nanobot compatibility; the adapter always
	// asks for guild messages, direct messages and message content.
	Intents int `json:"intents,omitempty"`
	// MaxMediaBytes bounds a downloaded attachment (default 25 MB,
	// Discord's upload limit without boosts).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
}

// DefaultAPIBase is Discord's REST API.
const DefaultAPIBase = "https://discord.com/api/v10"

// DefaultMaxMediaBytes is Discord's upload limit for unboosted servers.
const DefaultMaxMediaBytes = 25 << 20

// Validate reports the first invalid key of an enabled channel.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	const p = "channels.discord."
	switch {
	case strings.TrimSpace(c.Token) == "":
		return config.Invalid(p+"token", "required when the channel is enabled")
	case strings.ContainsAny(c.Token, " \t\n") || strings.HasPrefix(c.Token, "Bot "):
		return config.Invalid(p+"token", "the bare bot token, without \"Bot \" or spaces")
	case c.GroupPolicy != "" && c.GroupPolicy != GroupMention && c.GroupPolicy != GroupOpen && c.GroupPolicy != GroupAllowlist:
		return config.Invalid(p+"groupPolicy", "must be mention, open or allowlist, got %q", c.GroupPolicy)
	case c.GroupPolicy == GroupAllowlist && len(c.GroupAllowFrom) == 0:
		return config.Invalid(p+"groupAllowFrom", "must list channel or guild ids when groupPolicy is allowlist")
	case !c.DMPolicy.Valid():
		return config.Invalid(p+"dmPolicy", "must be pairing, allowlist, open or disabled, got %q", c.DMPolicy)
	case c.StreamEditInterval < 0 || c.StreamEditInterval > 60:
		return config.Invalid(p+"streamEditInterval", "must be 0..60 seconds, got %g", c.StreamEditInterval)
	case c.MaxMediaBytes < 0:
		return config.Invalid(p+"maxMediaBytes", "must not be negative")
	}
	for key, raw := range map[string]string{"apiBase": c.APIBase, "gatewayUrl": c.GatewayURL} {
		if raw == "" {
			continue
		}
		if u, err := url.Parse(raw); err != nil || u.Scheme == "" || u.Host == "" {
			return config.Invalid(p+key, "not an absolute URL: %q", raw)
		}
	}
	return nil
}

// editInterval is StreamEditInterval as a duration.
func (c Config) editInterval() time.Duration {
	if c.StreamEditInterval == 0 {
		return time.Second
	}
	return time.Duration(c.StreamEditInterval * float64(time.Second))
}

func on(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}
