package whatsapp

import (
	"regexp"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
)

// Group policies.
const (
	// GroupMention answers in groups only when the account is mentioned
	// or its message is replied to (default).
	GroupMention = "mention"
	// GroupOpen answers every group message.
	GroupOpen = "open"
	// GroupAllowlist answers the groups in groupAllowFrom.
	GroupAllowlist = "allowlist"
	// GroupDisabled ignores groups.
	GroupDisabled = "disabled"
)

// Config is the channels.whatsapp section, with nanobot's keys.
type Config struct {
	Enabled bool `json:"enabled"`
	// Account names the linked device in the fleet's WhatsApp bucket
	// (default "default"); letters, digits, '-' and '_'.
	Account string `json:"account,omitempty"`
	// AllowFrom lists phone numbers (digits, as in the JID) or LIDs; "*"
	// admits everyone.
	AllowFrom []string `json:"allowFrom,omitempty"`
	// GroupPolicy is "mention" (default), "open", "allowlist" or
	// "disabled".
	GroupPolicy string `json:"groupPolicy,omitempty"`
	// GroupAllowFrom lists the group JIDs (…@g.us) answered under
	// "allowlist".
	GroupAllowFrom []string `json:"groupAllowFrom,omitempty"`
	// DMPolicy for unknown senders in direct chats: "pairing" (default),
	// "allowlist", "open" or "disabled".
	DMPolicy access.DMPolicy `json:"dmPolicy,omitempty"`
	// Streaming is accepted for nanobot compatibility; answers are sent
	// whole (WhatsApp edits would notify the chat on every change).
	Streaming bool `json:"streaming,omitempty"`
	// SendProgress and SendToolHints override the channels-wide defaults.
	SendProgress  *bool `json:"sendProgress,omitempty"`
	SendToolHints *bool `json:"sendToolHints,omitempty"`
	// MaxMediaBytes bounds a downloaded attachment (default 20 MB).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
	// BridgeURL and BridgeToken are nanobot's former Node bridge:
	// accepted so that a nanobot configuration loads, and unused.
	BridgeURL   string `json:"bridgeUrl,omitempty"`
	BridgeToken string `json:"bridgeToken,omitempty"`
}

// DefaultAccount is the account name when the config gives none.
const DefaultAccount = "default"

var accountRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Validate reports the first invalid key of an enabled channel.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	const p = "channels.whatsapp."
	switch {
	case c.Account != "" && (!accountRE.MatchString(c.Account) || c.Account == "lid"):
		return config.Invalid(p+"account", "only letters, digits, '-' and '_', and not \"lid\", got %q", c.Account)
	case c.GroupPolicy != "" && c.GroupPolicy != GroupMention && c.GroupPolicy != GroupOpen &&
		c.GroupPolicy != GroupAllowlist && c.GroupPolicy != GroupDisabled:
		return config.Invalid(p+"groupPolicy", "must be mention, open, allowlist or disabled, got %q", c.GroupPolicy)
	case c.GroupPolicy == GroupAllowlist && len(c.GroupAllowFrom) == 0:
		return config.Invalid(p+"groupAllowFrom", "must list group JIDs when groupPolicy is allowlist")
	case !c.DMPolicy.Valid():
		return config.Invalid(p+"dmPolicy", "must be pairing, allowlist, open or disabled, got %q", c.DMPolicy)
	case c.MaxMediaBytes < 0:
		return config.Invalid(p+"maxMediaBytes", "must not be negative")
	}
	return nil
}

func (c Config) account() string {
	if c.Account == "" {
		return DefaultAccount
	}
	return c.Account
}

func on(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}
