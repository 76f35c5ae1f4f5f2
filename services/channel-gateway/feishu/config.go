package feishu

import (
	"strings"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
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

// DefaultMaxMediaBytes bounds a downloaded attachment when the section's
// maxMediaBytes is not set.
const DefaultMaxMediaBytes = 20 << 20

// Domains.
const (
	// DomainFeishu is Feishu, mainland China (default).
	DomainFeishu = "feishu"
	// DomainLark is Lark, the international edition.
	DomainLark = "lark"
)

// Config is the channels.feishu section, with nanobot's keys: the common
// ones (allowFrom lists open ids ou_…, user ids or union ids;
// groupAllowFrom lists chat ids oc_…; streaming updates one interactive
// card, by default at most once a second, where the platform allows five
// updates a second per message) and Feishu's own.
type Config struct {
	channelconfig.Common
	// AppID and AppSecret of the custom app (cli_…).
	AppID     string `json:"appId"`
	AppSecret string `json:"appSecret"`
	// EncryptKey and VerificationToken from the app's event settings;
	// webhook mode needs both (the signature is computed with the encrypt
	// key, the URL challenge carries the token).
	EncryptKey        string `json:"encryptKey,omitempty"`
	VerificationToken string `json:"verificationToken,omitempty"`
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

// Validate reports every invalid key of an enabled channel, joined.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	const p = "channels.feishu."
	var probs config.Problems
	probs.Join(channelconfig.Required("feishu", map[string]string{"appId": c.AppID, "appSecret": c.AppSecret}))
	if c.Domain != "" && c.Domain != DomainFeishu && c.Domain != DomainLark {
		probs.Add(p+"domain", "must be %q or %q, got %q", DomainFeishu, DomainLark, c.Domain)
	}
	if c.Mode != "" && c.Mode != ModeWebSocket && c.Mode != ModeWebhook {
		probs.Add(p+"mode", "must be %q or %q, got %q", ModeWebSocket, ModeWebhook, c.Mode)
	}
	if c.Mode == ModeWebhook && c.EncryptKey == "" {
		probs.Add(p+"encryptKey", "required in webhook mode: requests are verified with its signature")
	}
	if c.Mode == ModeWebhook && c.VerificationToken == "" {
		probs.Add(p+"verificationToken", "required in webhook mode: the URL challenge is checked with it")
	}
	if c.Webhook.Path != "" && !strings.HasPrefix(c.Webhook.Path, "/") {
		probs.Add(p+"webhook.path", "must start with /, got %q", c.Webhook.Path)
	}
	if c.ReplyFormat != "" && c.ReplyFormat != FormatCard && c.ReplyFormat != FormatPost && c.ReplyFormat != FormatText {
		probs.Add(p+"replyFormat", "must be card, post or text, got %q", c.ReplyFormat)
	}
	probs.Join(c.Common.Validate(channelconfig.Rules{Name: "feishu", GroupIDs: "chat ids"}))
	probs.Join(channelconfig.CheckURLs("feishu", map[string]string{"baseUrl": c.BaseURL}))
	return probs.Err()
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

// WebhookPath is the path webhook mode serves.
func (c Config) WebhookPath() string {
	if c.Webhook.Path != "" {
		return c.Webhook.Path
	}
	return DefaultWebhookPath
}

// KeyHints names nanobot's Feishu keys nanofleet does not take.
func (Config) KeyHints() map[string]string {
	const remove = "nanofleet's Feishu adapter has no such setting; remove the key"
	const react = "nanofleet's Feishu adapter does not react to messages; remove the key"
	return channelconfig.Hints(map[string]string{
		"reactEmoji":     react,
		"doneEmoji":      react,
		"toolHintPrefix": remove,
		"replyToMessage": "nanofleet's Feishu adapter always answers as a reply to the message that asked; remove the key",
		"topicIsolation": remove,
		"instanceId":     "nanofleet runs one Feishu app per fleet; remove the key",
		"name":           remove,
		"identityKey":    remove,
	})
}

// NanobotDefaults gives the Feishu keys nanobot 0.1 and 0.3 write by
// default.
func (Config) NanobotDefaults() map[string][]any {
	return map[string][]any{
		"reactEmoji":     {"THUMBSUP"},
		"instanceId":     {"default"},
		"name":           {"nanobot"},
		"replyToMessage": {false},
		"toolHintPrefix": {"\U0001F527"},
		"topicIsolation": {true},
	}
}
