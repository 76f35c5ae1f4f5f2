package config

import (
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// nanobot reads its keys in camelCase or snake_case (pydantic's alias
// generator), so a pasted nanobot file may have either; these helpers let
// a strict decode take both, and name what to write instead of a key
// nanobot documents and nanofleet does not take.

// KeyHints is implemented by a section's Config type that knows keys of
// nanobot's schema it does not take. The map gives, for such a key as
// nanobot writes it (camelCase), what the user should do instead; an
// unknown key found in a map says that rather than "check spelling".
type KeyHints interface {
	KeyHints() map[string]string
}

var keyHints = reflect.TypeFor[KeyHints]()

// hintFor returns the hint t gives for key (either case style), if any.
func hintFor(t reflect.Type, key string) (string, bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || !t.Implements(keyHints) {
		return "", false
	}
	h, ok := reflect.Zero(t).Interface().(KeyHints).KeyHints()[CamelCase(key)]
	return h, ok
}

// CamelCase returns nanobot's camelCase form of a snake_case key, as
// pydantic's to_camel does ("allow_from" → "allowFrom"); a key without
// '_' is returned as is.
func CamelCase(key string) string {
	if !strings.Contains(key, "_") {
		return key
	}
	parts := strings.Split(key, "_")
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1:] {
		if p == "" {
			continue
		}
		b.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	return b.String()
}

// camelKeys prepares data, decoded for t, for the strict decode.
//
// It renames every snake_case key of an object decoded into a struct to
// its camelCase form when the struct has a field for that form and none
// for the key as written. Keys of maps (provider, server and variable
// names) are the user's and are left as they are, as are the values of
// raw sections (their owner decodes them with DecodeStrict, which calls
// this again) and of types that decode themselves.
//
// It drops a key the struct has a hint for (see [KeyHints]) when its
// value is empty (null, "", [] or {}) or nanobot's default for it (see
// [NanobotDefaults]). nanobot writes every key of its schema into its
// config.json, most of them unset or at their default, and such a
// setting asks for nothing, which is what nanofleet does without it.
//
// It changes tree in place and returns the renames (the new key's path →
// the path as written, for errors to name what the user wrote), whether
// it changed anything, and an error naming both keys when one is written
// both ways.
func camelKeys(tree any, t reflect.Type, path string) (renames, bool, error) {
	p := prepass{renames: renames{}}
	if err := p.walk(tree, t, path); err != nil || !p.changed {
		return nil, false, err
	}
	return p.renames, true, nil
}

// renames maps the path of a key renamed by camelKeys to the path as the
// file wrote it.
type renames map[string]string

// written turns key, a path in the renamed data, into the path as the
// file wrote it: the deepest rename first, as its path has its parents'
// new names.
func (r renames) written(key string) string {
	paths := slices.SortedFunc(maps.Keys(r), func(a, b string) int { return len(b) - len(a) })
	for _, p := range paths {
		if key == p || strings.HasPrefix(key, p+".") || strings.HasPrefix(key, p+"[") {
			key = r[p] + key[len(p):]
		}
	}
	return key
}

// prepass is camelKeys' walk: what it renamed and whether it changed
// anything.
type prepass struct {
	renames renames
	changed bool
}

func (p *prepass) walk(tree any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage || reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	switch v := tree.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				key := k
				if _, ok := fieldFor(t, k); !ok {
					if camel, ok := snakeField(t, k); ok {
						if _, both := v[camel]; both {
							return Invalid(join(path, k), "is %s in snake_case; keep one of the two", join(path, camel))
						}
						v[camel] = v[k]
						delete(v, k)
						key, p.changed = camel, true
						p.renames[join(path, camel)] = join(path, k)
					}
				}
				f, ok := fieldFor(t, key)
				if !ok {
					if _, hinted := hintFor(t, key); hinted && (empty(v[key]) || isNanobotDefault(t, key, v[key])) {
						delete(v, key)
						p.changed = true
					}
					continue // otherwise reported as unknown by the strict decode
				}
				if err := p.walk(v[key], f.Type, join(path, key)); err != nil {
					return err
				}
			}
		case reflect.Map:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if err := p.walk(v[k], t.Elem(), join(path, k)); err != nil {
					return err
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, e := range v {
				if err := p.walk(e, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// snakeField returns the key of t's field that key, in snake_case, is
// written for: its camelCase form, or for a key all in lower case the
// field's key that form differs from only in case, since snake_case
// cannot write one ("blobs_max_mb" is blobsMaxMB).
func snakeField(t reflect.Type, key string) (string, bool) {
	camel := CamelCase(key)
	if camel == key {
		return "", false
	}
	if _, ok := fieldFor(t, camel); ok {
		return camel, true
	}
	if key != strings.ToLower(key) {
		return "", false
	}
	return fieldFold(t, camel)
}

// empty says whether a decoded JSON value is null, "", [] or {}.
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// KeyHints names nanobot's top-level sections nanofleet has elsewhere or
// not at all.
func (File) KeyHints() map[string]string {
	return map[string]string{
		"mcpServers":    "Claude Desktop's mcpServers block goes under tools: tools.mcpServers",
		"api":           "the OpenAI-compatible API is channels.api (enabled, token) on the web chat's listener, channels.web.listen",
		"transcription": "nanofleet does not transcribe voice; remove the section (voice notes reach the agent as media)",
		"modelPresets":  "nanofleet has no model presets; set agents.defaults.model, agents.defaults.provider and agents.defaults.fallbackModels",
		"audio":         "nanofleet does not speak its replies (no text-to-speech); remove the section",
	}
}

// NanobotDefaults gives the top-level sections nanobot 0.1 and 0.3 write
// by default.
func (File) NanobotDefaults() map[string][]any {
	return map[string][]any{
		"audio": {map[string]any{"tts": map[string]any{"provider": "edge_tts", "voice": "en-US-ChristopherNeural", "speed": 1}}},
		"api":   {map[string]any{"host": "127.0.0.1", "port": 8900, "timeout": 120, "apiKey": ""}},
		"transcription": {map[string]any{"enabled": true, "provider": nil, "model": nil, "language": nil,
			"maxDurationSec": 120, "maxUploadMb": 25}},
	}
}

// KeyHints names nanobot's agents.defaults keys nanofleet does not take.
func (AgentDefaults) KeyHints() map[string]string {
	const remove = "nanofleet has no such setting; remove the key"
	return map[string]string{
		"modelPreset":                     "nanofleet has no model presets; set agents.defaults.model and agents.defaults.provider",
		"reasoningEffort":                 "nanofleet does not set a reasoning effort; remove the key",
		"timezoneMode":                    "nanofleet does not detect the time zone; remove the key and set agents.defaults.timezone",
		"botName":                         "the CLI's display name is not configurable; remove the key",
		"botIcon":                         "the CLI's display icon is not configurable; remove the key",
		"unifiedSession":                  "nanofleet keeps one session per chat; remove the key",
		"disabledSkills":                  remove,
		"idleCompactAfterMinutes":         "nanofleet consolidates by size, not idle time (memory.consolidateShare); remove the key",
		"sessionTtlMinutes":               "nanofleet consolidates by size, not idle time (memory.consolidateShare); remove the key",
		"idleCompactCheckIntervalSeconds": "nanofleet consolidates by size, not idle time (memory.consolidateShare); remove the key",
		"consolidationRatio":              "use memory.consolidateShare",
		// nanobot 0.1's count of messages kept before consolidating.
		"memoryWindow":           "nanofleet keeps the history that fits agents.defaults.contextWindowTokens and consolidates the rest (memory.consolidateShare), not a count of messages; remove the key",
		"dream":                  "use memory.dream (every, e.g. \"2h\", or cron)",
		"maxConcurrentSubagents": "use schedule.subagents.maxPerSession",
		"maxToolResultChars":     "use tools.runner.oversizeChars",
		"failOnToolError":        remove,
		"providerRetryMode":      remove,
		"toolHintMaxLength":      remove,
		"contextBlockLimit":      remove,
	}
}

// NanobotDefaults gives the agents.defaults keys nanobot 0.1 and 0.3
// write by default.
func (AgentDefaults) NanobotDefaults() map[string][]any {
	return map[string][]any{
		"memoryWindow":                    {100},
		"botName":                         {"nanobot"},
		"botIcon":                         {"\U0001F408"},
		"consolidationRatio":              {0.5},
		"dream":                           {map[string]any{"enabled": true, "intervalH": 2, "modelOverride": nil}},
		"failOnToolError":                 {true},
		"idleCompactAfterMinutes":         {15},
		"idleCompactCheckIntervalSeconds": {60},
		"maxConcurrentSubagents":          {1},
		"maxToolResultChars":              {16000},
		"providerRetryMode":               {"standard"},
		"timezoneMode":                    {"auto"},
		"toolHintMaxLength":               {40},
		"unifiedSession":                  {false},
	}
}

// KeyHints names nanobot's provider keys nanofleet does not take.
func (Provider) KeyHints() map[string]string {
	const remove = "nanofleet has no such provider setting; remove the key"
	return map[string]string{
		"extraBody":     remove,
		"extraQuery":    remove,
		"proxy":         "set HTTPS_PROXY in the environment instead",
		"thinkingStyle": remove,
		"displayName":   remove,
		"region":        "nanofleet has no Bedrock provider; remove the key",
		"profile":       "nanofleet has no Bedrock provider; remove the key",
	}
}

// gatewaySection is nanobot's gateway section: nanofleet has each of its
// settings elsewhere, so every key is refused with where it went.
type gatewaySection struct{}

func (gatewaySection) KeyHints() map[string]string {
	return map[string]string{
		"host":        "the gateway's HTTP listener is channels.web.listen (\"host:port\")",
		"port":        "the gateway's HTTP listener is channels.web.listen (\"host:port\")",
		"heartbeat":   "use schedule.heartbeat (enabled, intervalS)",
		"restartMode": "nanofleet restarts nothing itself; remove the key",
	}
}

// NanobotDefaults gives the gateway section nanobot 0.1 and 0.3 write by
// default: its listener, and the heartbeat nanofleet runs by default too
// (schedule.heartbeat: every 30 minutes).
func (gatewaySection) NanobotDefaults() map[string][]any {
	return map[string][]any{
		"host":        {"0.0.0.0", "127.0.0.1"},
		"port":        {18790},
		"restartMode": {"auto"},
		"heartbeat": {
			map[string]any{"enabled": true, "intervalS": 1800},
			map[string]any{"enabled": true, "intervalS": 1800, "keepRecentMessages": 8},
		},
	}
}
