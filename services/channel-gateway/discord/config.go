package discord

import (
	"strings"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
)

// Config is the channels.discord section, with nanobot's keys: the common
// ones (allowFrom lists user ids or user names, a name of digits only
// matching nothing since it could pose as an id; groupAllowFrom lists channel
// or guild ids; streaming edits one message, by default at most once a
// second, where Discord allows about five edits per five seconds per
// channel; maxMediaBytes defaults to 25 MB, Discord's upload limit without
// boosts) and Discord's own.
type Config struct {
	channelconfig.Common
	// Token is the bot token from the Discord developer portal.
	Token string `json:"token"`
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
	// AllowChannels is nanobot's list of the channels answered in (empty:
	// all, as here); a list is refused for groupPolicy "allowlist".
	AllowChannels []string `json:"allowChannels,omitempty"`
}

// DefaultAPIBase is Discord's REST API.
const DefaultAPIBase = "https://discord.com/api/v10"

// DefaultMaxMediaBytes bounds an attachment when the section's
// maxMediaBytes is not set: UploadLimit.
const DefaultMaxMediaBytes = UploadLimit

// Validate reports every invalid key of an enabled channel, joined.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	const p = "channels.discord."
	var probs config.Problems
	if err := channelconfig.Required("discord", map[string]string{"token": c.Token}); err != nil {
		probs.Join(err)
	} else if strings.ContainsAny(c.Token, " \t\n") || strings.HasPrefix(c.Token, "Bot ") {
		probs.Add(p+"token", "the bare bot token, without \"Bot \" or spaces")
	}
	if len(c.AllowChannels) > 0 {
		probs.Add(p+"allowChannels", "use groupPolicy \"allowlist\" with groupAllowFrom listing the channel or guild ids")
	}
	probs.Join(c.Common.Validate(channelconfig.Rules{Name: "discord", GroupIDs: "channel or guild ids"}))
	probs.Join(channelconfig.CheckURLs("discord", map[string]string{"apiBase": c.APIBase, "gatewayUrl": c.GatewayURL}))
	return probs.Err()
}

// KeyHints names nanobot's Discord keys nanofleet does not take.
func (Config) KeyHints() map[string]string {
	const react = "nanofleet's Discord adapter does not react to messages; remove the key"
	const proxy = "nanofleet's Discord adapter takes no proxy; remove the key"
	return channelconfig.Hints(map[string]string{
		"readReceiptEmoji":  react,
		"workingEmoji":      react,
		"workingEmojiDelay": react,
		"proxy":             proxy,
		"proxyUsername":     proxy,
		"proxyPassword":     proxy,
	})
}

// NanobotDefaults gives the Discord keys nanobot 0.3 writes by default.
func (Config) NanobotDefaults() map[string][]any {
	return map[string][]any{
		"readReceiptEmoji":  {"\U0001F440"},
		"workingEmoji":      {"\U0001F527"},
		"workingEmojiDelay": {2},
	}
}
