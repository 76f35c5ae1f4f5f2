package slack

import (
	"strings"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
)

// Config is the channels.slack section, with nanobot's keys: the common
// ones (allowFrom lists user ids; groupAllowFrom lists channel ids;
// streaming updates one message with chat.update, by default at most every
// 1.2 s, as it is a tier 3 method, about 50 a minute) and Slack's own. The
// common dmPolicy is refused: Slack's direct messages are configured under
// dm, as in nanobot.
type Config struct {
	channelconfig.Common
	// Mode is "socket", the only mode (accepted for nanobot
	// compatibility).
	Mode string `json:"mode,omitempty"`
	// BotToken (xoxb-…) calls the Web API; AppToken (xapp-…) opens Socket
	// Mode connections.
	BotToken string `json:"botToken"`
	AppToken string `json:"appToken"`
	// DM configures direct messages.
	DM DM `json:"dm"`
	// ReplyInThread answers in a thread under the asking message (default
	// true).
	ReplyInThread *bool `json:"replyInThread,omitempty"`
	// ReactEmoji is added to a message when it is taken (default "eyes";
	// "none" turns it off).
	ReactEmoji string `json:"reactEmoji,omitempty"`
	// APIURL is the Web API base (default https://slack.com/api/).
	APIURL string `json:"apiUrl,omitempty"`
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

// DefaultMaxMediaBytes bounds a downloaded attachment when the section's
// maxMediaBytes is not set.
const DefaultMaxMediaBytes = 20 << 20

// Validate reports every invalid key of an enabled channel, joined.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	const p = "channels.slack."
	var probs config.Problems
	if c.Mode != "" && c.Mode != "socket" {
		probs.Add(p+"mode", "only \"socket\" is supported, got %q", c.Mode)
	}
	if !strings.HasPrefix(c.BotToken, "xoxb-") {
		probs.Add(p+"botToken", "required: a bot token starting with xoxb-")
	}
	if !strings.HasPrefix(c.AppToken, "xapp-") {
		probs.Add(p+"appToken", "required: an app-level token starting with xapp- (Socket Mode)")
	}
	if c.DMPolicy != "" {
		probs.Add(p+"dmPolicy", "Slack takes dm.policy (nanobot's key) instead")
	}
	if !c.DM.Policy.Valid() || c.DM.Policy == access.DMDisabled {
		probs.Add(p+"dm.policy", "must be pairing, allowlist or open, got %q (use dm.enabled to turn DMs off)", c.DM.Policy)
	}
	// The common dmPolicy is refused above, with what to use instead.
	common := c.Common
	common.DMPolicy = ""
	probs.Join(common.Validate(channelconfig.Rules{Name: "slack", GroupIDs: "channel ids"}))
	probs.Join(channelconfig.CheckURLs("slack", map[string]string{"apiUrl": c.APIURL}))
	return probs.Err()
}

// KeyHints names nanobot's Slack keys nanofleet does not take.
func (Config) KeyHints() map[string]string {
	const remove = "nanofleet's Slack adapter has no such setting; remove the key"
	return channelconfig.Hints(map[string]string{
		"webhookPath":          "nanofleet's Slack adapter uses Socket Mode only; remove the key",
		"userTokenReadOnly":    remove,
		"doneEmoji":            "nanofleet's Slack adapter adds only reactEmoji, when a message is taken; remove the key",
		"includeThreadContext": remove,
		"threadContextLimit":   remove,
		"groupRequireMention":  "groupPolicy \"allowlist\" answers every message of the channels in groupAllowFrom; \"mention\" answers mentions anywhere; remove the key",
	})
}

// NanobotDefaults gives the Slack keys nanobot 0.1 and 0.3 write by
// default.
func (Config) NanobotDefaults() map[string][]any {
	return map[string][]any{
		"webhookPath":          {"/slack/events"},
		"userTokenReadOnly":    {true},
		"doneEmoji":            {"white_check_mark"},
		"groupRequireMention":  {false},
		"includeThreadContext": {true},
		"threadContextLimit":   {20},
	}
}
