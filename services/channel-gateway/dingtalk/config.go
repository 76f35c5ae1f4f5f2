package dingtalk

import (
	"strings"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
)

// Config is the channels.dingtalk section, with nanobot's keys: the common
// ones (allowFrom lists staff ids; groupAllowFrom lists conversation ids
// cid…; streaming, with cardTemplateId, streams answers into an AI card,
// updated at most once per streamEditInterval, by default a second;
// without a template answers are sent whole) and DingTalk's own.
type Config struct {
	channelconfig.Common
	// ClientID (AppKey) and ClientSecret (AppSecret) of the robot's app.
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
	// RobotCode identifies the robot to the send API (default: the
	// client id, as for an internal app's robot).
	RobotCode string `json:"robotCode,omitempty"`
	// APIURL is the open API (default https://api.dingtalk.com), for
	// tests and proxies.
	APIURL string `json:"apiUrl,omitempty"`
	// OAPIURL is the older open API that takes media uploads (default
	// https://oapi.dingtalk.com, or apiUrl when that is set: a proxy or a
	// test fake serves both).
	OAPIURL string `json:"oapiUrl,omitempty"`
	// CardTemplateID is the AI card template answers stream into when
	// streaming is on; the template must have a markdown variable named
	// "content" (the card platform's standard AI card template has one).
	CardTemplateID string `json:"cardTemplateId,omitempty"`
	// GroupUserIsolation is nanobot's session per user in a group; false
	// (one session per group, as here) is accepted, true refused.
	GroupUserIsolation bool `json:"groupUserIsolation,omitempty"`
}

// DefaultAPIURL is DingTalk's open API.
const DefaultAPIURL = "https://api.dingtalk.com"

// DefaultOAPIURL is its older open API, which takes media uploads.
const DefaultOAPIURL = "https://oapi.dingtalk.com"

// DefaultMaxMediaBytes bounds a downloaded attachment when the section's
// maxMediaBytes is not set.
const DefaultMaxMediaBytes = 20 << 20

// Validate reports every invalid key of an enabled channel, joined.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	const p = "channels.dingtalk."
	var probs config.Problems
	probs.Join(channelconfig.Required("dingtalk", map[string]string{"clientId": c.ClientID, "clientSecret": c.ClientSecret}))
	if c.GroupUserIsolation {
		probs.Add(p+"groupUserIsolation", "nanofleet keeps one session per group chat; remove the key or set it to false")
	}
	probs.Join(c.Common.Validate(channelconfig.Rules{Name: "dingtalk", GroupIDs: "conversation ids"}))
	probs.Join(channelconfig.CheckURLs("dingtalk", map[string]string{"apiUrl": c.APIURL, "oapiUrl": c.OAPIURL}))
	return probs.Err()
}

func (c Config) apiURL() string {
	if c.APIURL != "" {
		return strings.TrimRight(c.APIURL, "/")
	}
	return DefaultAPIURL
}

func (c Config) oapiURL() string {
	switch {
	case c.OAPIURL != "":
		return strings.TrimRight(c.OAPIURL, "/")
	case c.APIURL != "":
		return c.apiURL()
	}
	return DefaultOAPIURL
}

func (c Config) robotCode() string {
	if c.RobotCode != "" {
		return c.RobotCode
	}
	return c.ClientID
}

// KeyHints names nanobot's DingTalk keys nanofleet does not take.
func (Config) KeyHints() map[string]string {
	const media = "nanofleet's DingTalk adapter has no such setting; remove the key"
	return channelconfig.Hints(map[string]string{
		"disablePrivateChat":              "use dmPolicy \"disabled\"",
		"allowRemoteMediaRedirects":       media,
		"remoteMediaRedirectAllowedHosts": media,
	})
}

// NanobotDefaults gives the DingTalk keys nanobot 0.3 writes by default.
func (Config) NanobotDefaults() map[string][]any {
	return map[string][]any{"allowRemoteMediaRedirects": {false}, "disablePrivateChat": {false}}
}
