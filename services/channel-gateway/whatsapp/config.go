package whatsapp

import (
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp/kvstore"
)

// Config is the channels.whatsapp section, with nanobot's keys: the common
// ones (allowFrom lists phone numbers, digits as in the JID, or LIDs;
// groupPolicy may also be "disabled"; groupAllowFrom lists group JIDs
// …@g.us; streaming is accepted for nanobot compatibility, answers are
// sent whole, as WhatsApp edits would notify the chat on every change) and
// WhatsApp's own.
type Config struct {
	channelconfig.Common
	// Account names the linked device in the fleet's WhatsApp bucket
	// (default "default"); letters, digits, '-' and '_'.
	Account string `json:"account,omitempty"`
	// BridgeURL and BridgeToken are nanobot's former Node bridge:
	// accepted so that a nanobot configuration loads, and unused.
	BridgeURL   string `json:"bridgeUrl,omitempty"`
	BridgeToken string `json:"bridgeToken,omitempty"`
}

// DefaultAccount is the account name when the config gives none.
const DefaultAccount = "default"

// DefaultMaxMediaBytes bounds a downloaded attachment when the section's
// maxMediaBytes is not set.
const DefaultMaxMediaBytes = 20 << 20

// Validate reports every invalid key of an enabled channel, joined.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	const p = "channels.whatsapp."
	var probs config.Problems
	if c.Account != "" && !kvstore.ValidAccount(c.Account) {
		probs.Add(p+"account", "only letters, digits, '-' and '_', and not \"lid\", got %q", c.Account)
	}
	probs.Join(c.Common.Validate(channelconfig.Rules{Name: "whatsapp", GroupIDs: "group JIDs", GroupDisabled: true}))
	return probs.Err()
}

func (c Config) account() string {
	if c.Account == "" {
		return DefaultAccount
	}
	return c.Account
}

// KeyHints names nanobot's WhatsApp keys nanofleet does not take.
func (Config) KeyHints() map[string]string {
	return channelconfig.Hints(map[string]string{
		"databasePath": "nanofleet keeps the linked device in the fleet's store: link it with `nanofleet channels login whatsapp` and remove the key",
		"lidMappings":  "allowFrom takes LIDs as well as phone numbers; list them there and remove the key",
	})
}
