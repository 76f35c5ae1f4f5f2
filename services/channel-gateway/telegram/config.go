package telegram

import (
	"regexp"
	"strings"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
)

// Config is the channels.telegram section, with nanobot's keys: the common
// ones (allowFrom lists user ids or user names; groupPolicy is "mention" or
// "open"; streaming edits one message with editMessageText, by default at
// most once a second, about what Telegram allows per chat) and Telegram's
// own.
type Config struct {
	channelconfig.Common
	// Token from @BotFather.
	Token string `json:"token"`
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

// Validate reports every invalid key of an enabled channel, joined.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	const p = "channels.telegram."
	var probs config.Problems
	if err := channelconfig.Required("telegram", map[string]string{"token": c.Token}); err != nil {
		probs.Join(err)
	} else if !strings.Contains(c.Token, ":") {
		probs.Add(p+"token", "does not look like a bot token (<id>:<secret>)")
	}
	probs.Join(c.Common.Validate(channelconfig.Rules{Name: "telegram"}))
	probs.Join(channelconfig.CheckURLs("telegram", map[string]string{"proxy": c.Proxy, "apiBase": c.APIBase, "webhook.url": c.Webhook.URL}))
	if c.Webhook.URL != "" && (len(c.Webhook.Secret) < 16 || len(c.Webhook.Secret) > 256 || !secretSyntax.MatchString(c.Webhook.Secret)) {
		probs.Add(p+"webhook.secret", "16-256 letters, digits, '_' or '-' are required with a webhook URL")
	}
	return probs.Err()
}

var secretSyntax = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// KeyHints names nanobot's Telegram keys nanofleet does not take.
func (Config) KeyHints() map[string]string {
	const listener = "the webhook is served at webhook.url's path on the gateway's listener, channels.web.listen; remove the key"
	const remove = "nanofleet's Telegram adapter has no such setting; remove the key"
	return channelconfig.Hints(map[string]string{
		"mode":                  "nanofleet polls unless webhook.url is set; remove the key (for a webhook set webhook.url and webhook.secret)",
		"webhookUrl":            "use webhook.url",
		"webhookSecretToken":    "use webhook.secret",
		"webhookPath":           listener,
		"webhookListenHost":     listener,
		"webhookListenPort":     listener,
		"webhookMaxConnections": remove,
		"reactEmoji":            "nanofleet's Telegram adapter does not react to messages; remove the key",
		"connectionPoolSize":    remove,
		"poolTimeout":           remove,
		"inlineKeyboards":       remove,
		"richMessages":          remove,
	})
}

// NanobotDefaults gives the Telegram keys nanobot 0.3 writes by default.
func (Config) NanobotDefaults() map[string][]any {
	return map[string][]any{
		"mode":                  {"polling"},
		"webhookPath":           {"/telegram"},
		"webhookListenHost":     {"127.0.0.1"},
		"webhookListenPort":     {8081},
		"webhookMaxConnections": {4},
		"reactEmoji":            {"\U0001F440"},
		"connectionPoolSize":    {32},
		"poolTimeout":           {5},
		"inlineKeyboards":       {false},
		"richMessages":          {false},
	}
}
