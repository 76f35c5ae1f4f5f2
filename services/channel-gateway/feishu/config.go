package feishu

import (
	"net/url"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
)

// Group policies.
const (
	// GroupMention answers in groups only when the bot is mentioned.
	GroupMention = "mention"
	// GroupOpen answers every message in groups.
	GroupOpen = "open"
	// GroupAllowlist answers every message of the chats in groupAllowFrom.
	GroupAllowlist = "allowlist"
)

// Connection modes.
const (
	// ModeWebSocket holds a long connection to the open platform, so no
	// public URL is needed (default).
	ModeWebSocket = "websocket"
	// ModeWebhook receives events the platform posts to webhook.url.
	ModeWebhook = "webhook"
)

// Reply formats.
const (
	// FormatCard sends an interactive card with a markdown element
	// (default): headings, lists, code and tables render.
	FormatCard = "card"
	// FormatPost sends a rich-text post with an md element.
	FormatPost = "post"
	// FormatText sends plain text.
	FormatText = "text"
)

// Domains.
const (
	// DomainFeishu is Feishu, mainland China (default).
	DomainFeishu = "feishu"
	// DomainLark is Lark, the international edition.
	DomainLark = "lark"
)

// Config is the channels.feishu section, with nanobot's keys.
type Config struct {
	Enabled bool `json:"enabled"`
	// AppID and AppSecret of the custom app (cli_…).
	AppID     string `json:"appId"`
	AppSecret string `json:"appSecret"`
	// EncryptKey and VerificationToken from the app's event settings;
	// webhook mode needs both (the signature is computed with the encrypt
	// key, the URL challenge carries the token).
	EncryptKey        string `json:"encryptKey,omitempty"`
	VerificationToken string `json:"verificationToken,omitempty"`
	// AllowFrom lists open ids (ou_…), user ids or union ids; "*" admits
	// everyone.
	AllowFrom []string `json:"allowFrom,omitempty"`
	// GroupPolicy is "mention" (default), "open" or "allowlist".
	GroupPolicy string `json:"groupPolicy,omitempty"`
	// GroupAllowFrom lists the chat ids (oc_…) answered under "allowlist".
	GroupAllowFrom []string `json:"groupAllowFrom,omitempty"`
	// DMPolicy for unknown senders in one-to-one chats: "pairing"
	// (default), "allowlist", "open" or "disabled".
	DMPolicy access.DMPolicy `json:"dmPolicy,omitempty"`
	// Streaming shows answers while they are written, in one interactive
	// card updated as the model writes.
	Streaming bool `json:"streaming,omitempty"`
	// StreamEditInterval is the least time between two updates of a
	// streamed card, in seconds (default 1; the platform allows five
	// updates a second per message).
	StreamEditInterval float64 `json:"streamEditInterval,omitempty"`
	// SendProgress and SendToolHints override the channels-wide defaults.
	SendProgress  *bool `json:"sendProgress,omitempty"`
	SendToolHints *bool `json:"sendToolHints,omitempty"`
	// Domain is "feishu" (default) or "lark".
	Domain string `json:"domain,omitempty"`
	// BaseURL overrides the open platform's address (tests, proxies).
	BaseURL string `json:"baseUrl,omitempty"`
	// Mode is "websocket" (default) or "webhook".
	Mode string `json:"mode,omitempty"`
	// Webhook configures webhook mode.
	Webhook Webhook `json:"webhook"`
	// ReplyFormat is "card" (default), "post" or "text".
	ReplyFormat string `json:"replyFormat,omitempty"`
	// MaxMediaBytes bounds a downloaded image or file (default 20 MB).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
}

// Webhook configures webhook mode.
type Webhook struct {
	// Path served on the gateway's HTTP listener (default
	// /hooks/feishu); the app's request URL points at it.
	Path string `json:"path,omitempty"`
}

// Base URLs of the open platform.
const (
	FeishuURL = "https://open.feishu.cn"
	LarkURL   = "https://open.larksuite.com"
)

// DefaultWebhookPath is where webhook mode listens by default.
const DefaultWebhookPath = "/hooks/feishu"

// Validate reports the first invalid key of an enabled channel.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	const p = "channels.feishu."
	switch {
	case strings.TrimSpace(c.AppID) == "":
		return config.Invalid(p+"appId", "required when the channel is enabled")
	case strings.TrimSpace(c.AppSecret) == "":
		return config.Invalid(p+"appSecret", "required when the channel is enabled")
	case c.Domain != "" && c.Domain != DomainFeishu && c.Domain != DomainLark:
		return config.Invalid(p+"domain", "must be %q or %q, got %q", DomainFeishu, DomainLark, c.Domain)
	case c.Mode != "" && c.Mode != ModeWebSocket && c.Mode != ModeWebhook:
		return config.Invalid(p+"mode", "must be %q or %q, got %q", ModeWebSocket, ModeWebhook, c.Mode)
	case c.Mode == ModeWebhook && c.EncryptKey == "":
		return config.Invalid(p+"encryptKey", "required in webhook mode: requests are verified with its signature")
	case c.Mode == ModeWebhook && c.VerificationToken == "":
		return config.Invalid(p+"verificationToken", "required in webhook mode: the URL challenge is checked with it")
	case c.Webhook.Path != "" && !strings.HasPrefix(c.Webhook.Path, "/"):
		return config.Invalid(p+"webhook.path", "must start with /, got %q", c.Webhook.Path)
	case c.GroupPolicy != "" && c.GroupPolicy != GroupMention && c.GroupPolicy != GroupOpen && c.GroupPolicy != GroupAllowlist:
		return config.Invalid(p+"groupPolicy", "must be mention, open or allowlist, got %q", c.GroupPolicy)
	case c.GroupPolicy == GroupAllowlist && len(c.GroupAllowFrom) == 0:
		return config.Invalid(p+"groupAllowFrom", "must list chat ids when groupPolicy is allowlist")
	case !c.DMPolicy.Valid():
		return config.Invalid(p+"dmPolicy", "must be pairing, allowlist, open or disabled, got %q", c.DMPolicy)
	case c.ReplyFormat != "" && c.ReplyFormat != FormatCard && c.ReplyFormat != FormatPost && c.ReplyFormat != FormatText:
		return config.Invalid(p+"replyFormat", "must be card, post or text, got %q", c.ReplyFormat)
	case c.MaxMediaBytes < 0:
		return config.Invalid(p+"maxMediaBytes", "must not be negative")
	case c.StreamEditInterval < 0 || c.StreamEditInterval > 60:
		return config.Invalid(p+"streamEditInterval", "must be 0..60 seconds, got %g", c.StreamEditInterval)
	}
	if c.BaseURL != "" {
		if u, err := url.Parse(c.BaseURL); err != nil || u.Scheme == "" || u.Host == "" {
			return config.Invalid(p+"baseUrl", "not an absolute URL: %q", c.BaseURL)
		}
	}
	return nil
}

// baseURL is the open platform address the config selects.
func (c Config) baseURL() string {
	switch {
	case c.BaseURL != "":
		return strings.TrimRight(c.BaseURL, "/")
	case c.Domain == DomainLark:
		return LarkURL
	}
	return FeishuURL
}

// editInterval is StreamEditInterval as a duration.
func (c Config) editInterval() time.Duration {
	if c.StreamEditInterval == 0 {
		return time.Second
	}
	return time.Duration(c.StreamEditInterval * float64(time.Second))
}

// WebhookPath is the path webhook mode serves.
func (c Config) WebhookPath() string {
	if c.Webhook.Path != "" {
		return c.Webhook.Path
	}
	return DefaultWebhookPath
}

func on(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}
