// Package channelconfig holds the keys every chat platform's section under
// channels shares (nanobot's enabled, allowFrom, groupPolicy, …) and their
// validation, so each adapter's Config embeds [Common] and adds only its
// credentials and platform settings.
package channelconfig

import (
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
)

// Group policies: which group messages an adapter answers.
const (
	// GroupMention answers in groups only when the bot is mentioned or
	// replied to (every adapter's default).
	GroupMention = "mention"
	// GroupOpen answers every group message.
	GroupOpen = "open"
	// GroupAllowlist answers every message of the groups listed in
	// groupAllowFrom, and nothing elsewhere.
	GroupAllowlist = "allowlist"
	// GroupDisabled ignores group messages, where the platform allows it.
	GroupDisabled = "disabled"
)

// MaxStreamEditInterval bounds streamEditInterval, in seconds.
const MaxStreamEditInterval = 60

// Common is the part of a channels.<name> section every platform has.
// Embedded in an adapter's Config, its keys sit beside the platform's own.
type Common struct {
	Enabled bool `json:"enabled"`
	// AllowFrom lists the platform's user ids (or names, where it has
	// them) allowed everywhere; "*" admits everyone.
	AllowFrom []string `json:"allowFrom,omitempty"`
	// GroupPolicy is "mention" (default), "open" or, where the platform
	// supports it, "allowlist".
	GroupPolicy string `json:"groupPolicy,omitempty"`
	// GroupAllowFrom lists the group (chat, channel…) ids answered under
	// "allowlist".
	GroupAllowFrom []string `json:"groupAllowFrom,omitempty"`
	// DMPolicy for unknown senders in direct messages: "pairing"
	// (default), "allowlist", "open" or "disabled".
	DMPolicy access.DMPolicy `json:"dmPolicy,omitempty"`
	// Streaming shows answers while they are written by editing one
	// message, where the platform allows it.
	Streaming bool `json:"streaming,omitempty"`
	// StreamEditInterval is the least time between two edits of a
	// streamed answer, in seconds (0: the adapter's default, fitted to the
	// platform's edit limits).
	StreamEditInterval float64 `json:"streamEditInterval,omitempty"`
	// SendProgress and SendToolHints override the channels-wide defaults.
	SendProgress  *bool `json:"sendProgress,omitempty"`
	SendToolHints *bool `json:"sendToolHints,omitempty"`
	// MaxMediaBytes bounds a downloaded attachment (0: the adapter's
	// default, usually the platform's own limit).
	MaxMediaBytes int64 `json:"maxMediaBytes,omitempty"`
}

// Rules are what an adapter supports of the common keys.
type Rules struct {
	// Name is the section's key under channels, e.g. "telegram".
	Name string
	// GroupIDs says what groupAllowFrom lists ("chat ids"), for the error
	// when it is missing; empty means the platform has no allowlist group
	// policy.
	GroupIDs string
	// GroupDisabled allows groupPolicy "disabled".
	GroupDisabled bool
}

// Validate reports every invalid common key, naming its full path
// (channels.<name>.<key>), joined. A disabled section is not checked.
func (c Common) Validate(r Rules) error {
	if !c.Enabled {
		return nil
	}
	p := "channels." + r.Name + "."
	policies := []string{GroupMention, GroupOpen}
	if r.GroupIDs != "" {
		policies = append(policies, GroupAllowlist)
	}
	if r.GroupDisabled {
		policies = append(policies, GroupDisabled)
	}
	var probs config.Problems
	if c.GroupPolicy != "" && !slices.Contains(policies, c.GroupPolicy) {
		probs.Add(p+"groupPolicy", "must be %s, got %q", strings.Join(policies, ", "), c.GroupPolicy)
	}
	switch {
	case r.GroupIDs == "" && len(c.GroupAllowFrom) > 0:
		probs.Add(p+"groupAllowFrom", "%s has no allowlist group policy; use allowFrom", r.Name)
	case c.GroupPolicy == GroupAllowlist && len(c.GroupAllowFrom) == 0:
		probs.Add(p+"groupAllowFrom", "must list %s when groupPolicy is allowlist", r.GroupIDs)
	}
	if !c.DMPolicy.Valid() {
		probs.Add(p+"dmPolicy", "must be pairing, allowlist, open or disabled, got %q", c.DMPolicy)
	}
	if c.StreamEditInterval < 0 || c.StreamEditInterval > MaxStreamEditInterval {
		probs.Add(p+"streamEditInterval", "must be 0..%d seconds, got %g", MaxStreamEditInterval, c.StreamEditInterval)
	}
	if c.MaxMediaBytes < 0 {
		probs.Add(p+"maxMediaBytes", "must not be negative")
	}
	return probs.Err()
}

// AdmitsGroup applies groupPolicy to a group message: "open" admits it,
// "disabled" does not, "allowlist" admits it when one of chats (the ids
// a platform's groupAllowFrom may name: the chat, its server…) is
// listed, and "mention", the default, when mentioned says the message
// addresses the bot.
func (c Common) AdmitsGroup(mentioned bool, chats ...string) bool {
	switch c.GroupPolicy {
	case GroupOpen:
		return true
	case GroupDisabled:
		return false
	case GroupAllowlist:
		return slices.ContainsFunc(chats, func(chat string) bool { return slices.Contains(c.GroupAllowFrom, chat) })
	}
	return mentioned
}

// Policy is the access policy of the section's allowFrom and dmPolicy
// for channel.
func (c Common) Policy(channel string) access.Policy {
	return access.Policy{Channel: channel, AllowFrom: c.AllowFrom, DM: c.DMPolicy}
}

// EditInterval is StreamEditInterval as a duration, def when unset.
func (c Common) EditInterval(def time.Duration) time.Duration {
	if c.StreamEditInterval == 0 {
		return def
	}
	return time.Duration(c.StreamEditInterval * float64(time.Second))
}

// MediaLimit is MaxMediaBytes, def when unset.
func (c Common) MediaLimit(def int64) int64 {
	if c.MaxMediaBytes == 0 {
		return def
	}
	return c.MaxMediaBytes
}

// Progress says whether progress text is shown: the section's
// sendProgress, else the channels-wide def.
func (c Common) Progress(def bool) bool { return On(c.SendProgress, def) }

// ToolHints says whether tool hints are shown: the section's
// sendToolHints, else the channels-wide def.
func (c Common) ToolHints(def bool) bool { return On(c.SendToolHints, def) }

// ShowsLive says whether a live message of kind is shown: progress and
// tool hints per the section's sendProgress / sendToolHints, else the
// channels-wide progress and hints; no other live kind is.
func (c Common) ShowsLive(kind nanofleetv1.OutboundKind, progress, hints bool) bool {
	switch kind {
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS:
		return c.Progress(progress)
	case nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT:
		return c.ToolHints(hints)
	}
	return false
}

// LiveText is the text a live message is shown with, for an adapter
// that shows progress and tool hints differently: asProgress or asHint of
// its content, by its kind. ok is false when it is not shown (see
// [Common.ShowsLive]).
func (c Common) LiveText(msg *nanofleetv1.OutboundMessage, progress, hints bool, asProgress, asHint func(content string) string) (text string, ok bool) {
	if !c.ShowsLive(msg.GetKind(), progress, hints) {
		return "", false
	}
	if msg.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT {
		return asHint(msg.GetContent()), true
	}
	return asProgress(msg.GetContent()), true
}

// On is *p, or def when the key was not set.
func On(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

// Required reports every one of keys (key below channels.<name> → value)
// that is blank, joined: the credentials an enabled channel cannot run
// without. Keys are reported in sorted order.
func Required(name string, keys map[string]string) error {
	var p config.Problems
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		if strings.TrimSpace(keys[key]) == "" {
			p.Add("channels."+name+"."+key, "required when the channel is enabled")
		}
	}
	return p.Err()
}

// CheckURLs reports every one of urls (key below channels.<name> → value)
// that is set and not an absolute URL, joined.
func CheckURLs(name string, urls map[string]string) error {
	var p config.Problems
	for _, key := range slices.Sorted(maps.Keys(urls)) {
		raw := urls[key]
		if raw == "" {
			continue
		}
		if u, err := url.Parse(raw); err != nil || u.Scheme == "" || u.Host == "" {
			p.Add("channels."+name+"."+key, "not an absolute URL: %q", raw)
		}
	}
	return p.Err()
}

// Hints returns the platform's hints for nanobot's keys it does not take
// (see [config.KeyHints]) with those every platform shares.
func Hints(own map[string]string) map[string]string {
	h := map[string]string{
		"showReasoning": "nanofleet does not show the model's reasoning; remove the key",
	}
	for k, v := range own {
		h[k] = v
	}
	return h
}
