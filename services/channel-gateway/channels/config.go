package channels

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu"
	"github.com/nanofleet/nanofleet/services/channel-gateway/openaiapi"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram"
	"github.com/nanofleet/nanofleet/services/channel-gateway/webchat"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp"
)

// Config is the channels section of the configuration file.
type Config struct {
	// SendProgress shows progress text while a turn runs (default true).
	SendProgress *bool `json:"sendProgress,omitempty"`
	// SendToolHints shows tool hints such as "$ ls -la" (default false).
	SendToolHints *bool `json:"sendToolHints,omitempty"`
	// Transcription settings of nanobot, accepted and unused here (voice
	// notes are passed to the worker as media).
	TranscriptionProvider string `json:"transcriptionProvider,omitempty"`
	TranscriptionLanguage string `json:"transcriptionLanguage,omitempty"`

	Telegram telegram.Config  `json:"telegram"`
	Slack    slack.Config     `json:"slack"`
	Discord  discord.Config   `json:"discord"`
	Web      webchat.Config   `json:"web"`
	API      openaiapi.Config `json:"api"`
	Feishu   feishu.Config    `json:"feishu"`
	DingTalk dingtalk.Config  `json:"dingtalk"`
	WhatsApp whatsapp.Config  `json:"whatsapp"`

	// Unsupported holds, by name, the sections of the channels nanobot
	// has and nanofleet does not (see [nanobotOnly]): accepted so that a
	// nanobot configuration loads, refused when enabled.
	Unsupported map[string]json.RawMessage `json:"-"`
}

// nanobotOnly says whether name is one of nanobot's channels that
// nanofleet does not have.
func nanobotOnly(name string) bool {
	return slices.Contains([]string{"email", "qq", "matrix", "mochat", "mattermost", "msteams", "napcat", "signal", "websocket", "wecom", "weixin"}, name)
}

// KeyHints names nanobot's channels-wide keys nanofleet does not take.
func (Config) KeyHints() map[string]string {
	return map[string]string{
		"showReasoning":  "nanofleet does not show the model's reasoning; remove the key",
		"sendMaxRetries": "nanofleet retries a delivery by itself until it succeeds or the platform refuses it for good; remove the key",
	}
}

// NanobotDefaults gives the channels-wide keys nanobot 0.3 writes by
// default.
func (Config) NanobotDefaults() map[string][]any {
	return map[string][]any{"showReasoning": {true}, "sendMaxRetries": {3}}
}

// Defaults is the section when the file has none: the web chat and the
// API on, the platforms off.
func Defaults() Config {
	return Config{
		Web: webchat.Config{Enabled: true},
		API: openaiapi.Config{Enabled: true},
	}
}

// FromFile decodes the channels section of f over [Defaults] and validates
// it. Decoding is strict: an unknown or mistyped key fails, named with its
// path (e.g. channels.telegram.tokn).
func FromFile(f *config.File) (Config, error) {
	var sections map[string]json.RawMessage
	if err := f.Section("channels", &sections); err != nil {
		return Config{}, err
	}
	c := Defaults()
	targets := map[string]any{
		"sendProgress": &c.SendProgress, "sendToolHints": &c.SendToolHints,
		"transcriptionProvider": &c.TranscriptionProvider, "transcriptionLanguage": &c.TranscriptionLanguage,
		"telegram": &c.Telegram, "slack": &c.Slack, "web": &c.Web, "api": &c.API,
		"discord": &c.Discord, "whatsapp": &c.WhatsApp, "feishu": &c.Feishu, "dingtalk": &c.DingTalk,
		// Deprecated in nanobot and ignored there too.
		"extractDocumentText": new(bool),
	}
	keys := slices.Sorted(maps.Keys(sections))
	// Every subsection is decoded and validated, past the ones that
	// fail: one start names every problem of the section.
	var probs config.Problems
	for _, k := range keys {
		// nanobot takes snake_case keys as their camelCase form.
		name := config.CamelCase(k)
		if _, both := sections[name]; both && name != k {
			probs.Add("channels."+k, "is channels.%s in snake_case; keep one of the two", name)
			continue
		}
		if nanobotOnly(name) {
			if c.Unsupported == nil {
				c.Unsupported = map[string]json.RawMessage{}
			}
			c.Unsupported[name] = sections[k]
			continue
		}
		target, ok := targets[name]
		if !ok {
			if hint, ok := c.KeyHints()[name]; ok {
				if !config.AsksNothing(c, name, sections[k]) {
					probs.Add("channels."+k, "%s", hint)
				}
				continue
			}
			probs.Join(config.UnknownKey("channels."+k, slices.Collect(maps.Keys(targets))...))
			continue
		}
		probs.Join(decodeStrict("channels."+k, sections[k], target))
	}
	probs.Join(c.Validate())
	if err := probs.Err(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// decodeStrict decodes one subsection refusing unknown keys, naming a bad
// key with its whole path.
func decodeStrict(path string, raw json.RawMessage, v any) error {
	return config.DecodeStrict(raw, v, path)
}

// Enabled lists the enabled channels by name.
func (c Config) Enabled() []string {
	var out []string
	for _, ch := range []struct {
		name string
		on   bool
	}{
		{"telegram", c.Telegram.Enabled}, {"slack", c.Slack.Enabled}, {"discord", c.Discord.Enabled},
		{"feishu", c.Feishu.Enabled}, {"dingtalk", c.DingTalk.Enabled}, {"whatsapp", c.WhatsApp.Enabled},
		{"web", c.Web.Enabled}, {"api", c.API.Enabled},
	} {
		if ch.on {
			out = append(out, ch.name)
		}
	}
	return out
}

// Validate reports every invalid key, naming it, joined.
func (c Config) Validate() error {
	var probs config.Problems
	for _, v := range []interface{ Validate() error }{c.Telegram, c.Slack, c.Discord, c.Web, c.API, c.Feishu, c.DingTalk, c.WhatsApp} {
		probs.Join(v.Validate())
	}
	for _, name := range slices.Sorted(maps.Keys(c.Unsupported)) {
		raw := c.Unsupported[name]
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var probe struct {
			Enabled bool `json:"enabled"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			probs.Add("channels."+name, "not an object: %w", err)
			continue
		}
		switch {
		case probe.Enabled && name == "websocket":
			probs.Add("channels.websocket.enabled", "nanobot's WebUI channel is nanofleet's web chat, channels.web; set this to false")
		case probe.Enabled:
			probs.Add(fmt.Sprintf("channels.%s.enabled", name), "nanofleet has no %s channel (yet); set it to false", name)
		}
	}
	return probs.Err()
}
