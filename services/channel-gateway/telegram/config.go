package telegram

import (
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
)

// Group policies.
const (
	// GroupMention answers in groups only when the bot is mentioned or
	// replied to.
	GroupMention = "mention"
	// GroupOpen answers every message in groups.
	GroupOpen = "open"
)

// Config is the channels.telegram section, with nanobot's keys.
type Config struct {
	Enabled bool `json:"enabled"`
	// Token from @BotFather.
	Token string `json:"token"`
	// AllowFrom lists user ids or user names; "*" admits everyone.
	AllowFrom []string `json:"allowFrom,omitempty"`
	// GroupPolicy is "mention" (default) or "open".
	GroupPolicy string `json:"groupPolicy,omitempty"`
	// DMPolicy for unknown senders in private chats: "pairing" (default),
	// "allowlist", "open" or "disabled".
	DMPolicy access.DMPolicy `json:"dmPolicy,omitempty"`
	// Streaming shows answers while they are written by editing one
	// message (editMessageText).
	Streaming bool `json:"streaming,omitempty"`
	// StreamEditInterval is the least time between two edits of a
	// streamed answer, in seconds (default 1, about what Telegram allows
	// per chat).
	StreamEditInterval float64 `json:"streamEditInterval,omitempty"`
	// SendProgress and SendToolHints override the channels-wide defaults.
	SendProgress  *bool `json:"sendProgress,omitempty"`
	SendToolHints *bool `json:"sendToolHints,omitempty"`
	// ReplyToMessage makes answers quote the message that asked (default
	// true).
	ReplyToMessage *bool `json:"replyToMessage,omitempty"`
	// Proxy is an HTTP or SOCKS5 proxy URL for the Bot API.
	Proxy string `json:"proxy,omitempty"`
	// APIBase is the Bot API server, for a self-hosted telegram-bot-api
	// (default https://api.telegram.org).
	APIBase string `json:"apiBase,omitempty"`
	// Webhook switches from long polling to a webhook.
	Webhook Webhook `json:"webhook"`
	// MaxMediaBytes bounds a downloaded attachment (default 20 MB, the Bot
	// API's own download limit).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
}

// Webhook configures webhook mode.
type Webhook struct {
	// URL Telegram posts updates to, e.g.
	// https://bot.example.com/telegram/webhook; its path is served on the
	// gateway's HTTP listener.
	URL string `json:"url,omitempty"`
	// Secret is the secret token Telegram sends in
	// X-Telegram-Bot-Api-Secret-Token; required with a URL.
	Secret string `json:"secret,omitempty"`
}

// DefaultAPIBase is Telegram's Bot API server.
const DefaultAPIBase = "https://api.telegram.org"

// DefaultMaxMediaBytes is the Bot API's download limit.
const DefaultMaxMediaBytes = 20 << 20

// Validate reports the first invalid key of an enabled channel.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	const p = "channels.telegram."
	switch {
	case strings.TrimSpace(c.Token) == "":
		return config.Invalid(p+"token", "required when the channel is enabled")
	case !strings.Contains(c.Token, ":"):
		return config.Invalid(p+"token", "does not look like a bot token (<id>:<secret>)")
	case c.GroupPolicy != "" && c.GroupPolicy != GroupMention && c.GroupPolicy != GroupOpen:
		return config.Invalid(p+"groupPolicy", "must be %q or %q, got %q", GroupMention, GroupOpen, c.GroupPolicy)
	case !c.DMPolicy.Valid():
		return config.Invalid(p+"dmPolicy", "must be pairing, allowlist, open or disabled, got %q", c.DMPolicy)
	case c.MaxMediaBytes < 0:
		return config.Invalid(p+"maxMediaBytes", "must not be negative")
	case c.StreamEditInterval < 0 || c.StreamEditInterval > 60:
		return config.Invalid(p+"streamEditInterval", "must be 0..60 seconds, got %g", c.StreamEditInterval)
	}
	for key, raw := range map[string]string{"proxy": c.Proxy, "apiBase": c.APIBase, "webhook.url": c.Webhook.URL} {
		if raw == "" {
			continue
		}
		if u, err := url.Parse(raw); err != nil || u.Scheme == "" || u.Host == "" {
			return config.Invalid(p+key, "not an absolute URL: %q", raw)
		}
	}
	if c.Webhook.URL != "" && (len(c.Webhook.Secret) < 16 || len(c.Webhook.Secret) > 256 || !secretSyntax.MatchString(c.Webhook.Secret)) {
		return config.Invalid(p+"webhook.secret", "16-256 letters, digits, '_' or '-' are required with a webhook URL")
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

var secretSyntax = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func on(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}
