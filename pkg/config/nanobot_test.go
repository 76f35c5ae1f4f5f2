package config

import (
	"errors"
	"strings"
	"testing"
)

// TestNanobotSnakeCase: nanobot reads snake_case keys as their camelCase
// form, so a pasted file using them loads the same; names chosen by the
// user (providers, header names) keep their underscores.
func TestNanobotSnakeCase(t *testing.T) {
	tests := []struct {
		name, json string
		check      func(*File) bool
	}{
		{"agent defaults", `{"agents": {"defaults": {"max_tokens": 100, "max_tool_iterations": 7, "context_window_tokens": 4096}}}`,
			func(f *File) bool {
				d := f.Agents.Defaults
				return d.MaxTokens == 100 && d.MaxToolIterations == 7 && d.ContextWindowTokens == 4096
			}},
		{"provider keys, not provider names", `{"providers": {"azure_openai": {"api_key": "k", "api_base": "https://x.example/v1", "extra_headers": {"X_Team": "a"}}}}`,
			func(f *File) bool {
				p, ok := f.Providers["azure_openai"]
				return ok && p.APIKey == "k" && p.APIBase == "https://x.example/v1" && p.ExtraHeaders["X_Team"] == "a"
			}},
		{"fallback models", `{"agents": {"defaults": {"fallback_models": ["gpt-4o"]}}}`,
			func(f *File) bool { return len(f.Agents.Defaults.FallbackModels) == 1 }},
		{"camelCase unchanged", `{"agents": {"defaults": {"maxTokens": 99}}}`,
			func(f *File) bool { return f.Agents.Defaults.MaxTokens == 99 }},
		{"big numbers kept", `{"nats": {"lease_ttl_seconds": 31, "replay_window_seconds": 86400}}`,
			func(f *File) bool { return f.NATS.LeaseTTLSeconds == 31 && f.NATS.ReplayWindowSeconds == 86400 }},
		// snake_case cannot say that MB is in capitals.
		{"acronym key", `{"nats": {"blobs_max_mb": 64}}`,
			func(f *File) bool { return f.NATS.BlobsMaxMB == 64 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Defaults()
			if err := Parse(f, []byte(tt.json), env(nil)); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !tt.check(f) {
				t.Errorf("decoded %+v, %+v", f.Agents.Defaults, f.Providers)
			}
		})
	}
}

// TestSectionSnakeCase: a raw section decoded by its owner takes
// snake_case keys too, below maps and in lists.
func TestSectionSnakeCase(t *testing.T) {
	type server struct {
		ToolTimeout  int      `json:"toolTimeout"`
		EnabledTools []string `json:"enabledTools"`
	}
	var v struct {
		MCPServers map[string]server `json:"mcpServers"`
		List       []server          `json:"list"`
	}
	f := &File{Tools: []byte(`{"mcp_servers": {"my_server": {"tool_timeout": 10, "enabled_tools": ["a_b"]}}, "list": [{"tool_timeout": 3}]}`)}
	if err := f.Section("tools", &v); err != nil {
		t.Fatal(err)
	}
	s, ok := v.MCPServers["my_server"]
	if !ok || s.ToolTimeout != 10 || s.EnabledTools[0] != "a_b" || v.List[0].ToolTimeout != 3 {
		t.Errorf("decoded %+v", v)
	}
}

// TestNanobotKeysRefused: a nanobot key nanofleet does not take fails
// naming its whole path and what to use instead.
func TestNanobotKeysRefused(t *testing.T) {
	tests := []struct{ json, key, says string }{
		{`{"agents": {"defaults": {"maxTokens": 5, "max_tokens": 6}}}`, "agents.defaults.max_tokens", "keep one"},
		{`{"agents": {"defaults": {"reasoningEffort": "high"}}}`, "agents.defaults.reasoningEffort", "remove the key"},
		{`{"agents": {"defaults": {"reasoning_effort": "high"}}}`, "agents.defaults.reasoning_effort", "remove the key"},
		{`{"agents": {"defaults": {"modelPreset": "fast"}}}`, "agents.defaults.modelPreset", "no model presets"},
		{`{"agents": {"defaults": {"dream": {"intervalH": 2}}}}`, "agents.defaults.dream", "memory.dream"},
		{`{"agents": {"defaults": {"consolidationRatio": 0.7}}}`, "agents.defaults.consolidationRatio", "memory.consolidateShare"},
		{`{"agents": {"defaults": {"memory_window": 50}}}`, "agents.defaults.memory_window", "agents.defaults.contextWindowTokens"},
		{`{"providers": {"openai": {"proxy": "http://p:1"}}}`, "providers.openai.proxy", "HTTPS_PROXY"},
		{`{"mcpServers": {"fs": {"command": "npx"}}}`, "mcpServers", "tools.mcpServers"},
		{`{"modelPresets": {"fast": {"model": "m"}}}`, "modelPresets", "agents.defaults.model"},
		{`{"model_presets": {"fast": {"model": "m"}}}`, "model_presets", "agents.defaults.model"},
		{`{"providers": {"openai": {"apiType": "responses"}}}`, "providers.openai.apiType", "chat completions"},
		{`{"providers": {"openai": {"extraBody": {"a": 1}}}}`, "providers.openai.extraBody", "remove the key"},
		{`{"api": {"port": 8900}}`, "api", "channels.api"},
		{`{"transcription": {"enabled": true}}`, "transcription", "remove the section"},
		{`{"gateway": {"port": 18800}}`, "gateway.port", "channels.web.listen"},
		{`{"gateway": {"host": "192.168.1.5", "port": 18790}}`, "gateway.host", "channels.web.listen"},
		{`{"gateway": {"heartbeat": {"enabled": true, "intervalS": 600}}}`, "gateway.heartbeat", "schedule.heartbeat"},
		{`{"agents": {"defaults": {"memoryWindow": 50}}}`, "agents.defaults.memoryWindow", "contextWindowTokens"},
		{`{"audio": {"tts": {"provider": "openai"}}}`, "audio", "remove the section"},
		{`{"gateway": {"heartbeat": {"intervalS": 1800}}}`, "gateway.heartbeat", "schedule.heartbeat"},
		{`{"gateway": {"restart_mode": "never"}}`, "gateway.restart_mode", "remove the key"},
		{`{"gateway": {"prot": 1}}`, "gateway.prot", "check spelling"},
		{`{"agents": {"defaults": {"modle": "x"}}}`, "agents.defaults.modle", "check spelling"},
		// A key is named as the file wrote it, also below a renamed one.
		{`{"agents": {"defaults": {"max_tokens": "lots"}}}`, "agents.defaults.max_tokens", "must be a whole number"},
		{`{"nats": {"tls": {"cert_file": 5}}}`, "nats.tls.cert_file", "must be a string"},
		{`{"providers": {"openai": {"extra_headers": {"A": 1}}}}`, "providers.openai.extra_headers.A", "must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			err := Parse(Defaults(), []byte(tt.json), env(nil))
			var ce *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &ce) {
				t.Fatalf("Parse(%s) = %v, want a *config.Error", tt.json, err)
			}
			if ce.Key != tt.key || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Parse(%s) = %v, want it to name %s and say %q", tt.json, err, tt.key, tt.says)
			}
		})
	}
	if err := Parse(Defaults(), []byte(`{"gateway": {}}`), env(nil)); err != nil {
		t.Errorf("an empty gateway section: %v", err)
	}
}

// TestNanobotDefaultsLoad: keys nanofleet does not take load when they
// hold the value `nanobot onboard` writes for them, in either case style
// and however nanobot writes a number: they ask for nothing nanofleet
// does not do anyway. They failed the file nanobot wrote.
func TestNanobotDefaultsLoad(t *testing.T) {
	for _, data := range []string{
		`{"gateway": {"host": "0.0.0.0", "port": 18790, "heartbeat": {"enabled": true, "intervalS": 1800}}}`,
		`{"gateway": {"heartbeat": {"enabled": true, "interval_s": 1800.0}}}`,
		`{"agents": {"defaults": {"memoryWindow": 100}}}`,
		`{"agents": {"defaults": {"memory_window": 100}}}`,
		`{"audio": {"tts": {"provider": "edge_tts", "voice": "en-US-ChristopherNeural", "speed": 1.0}}}`,
	} {
		if err := Parse(Defaults(), []byte(data), env(nil)); err != nil {
			t.Errorf("Parse(%s) = %v", data, err)
		}
	}
}

// TestSectionNamesKeysAsWritten: below a renamed key, an unknown or
// mistyped key of a section is named with the path the file wrote.
func TestSectionNamesKeysAsWritten(t *testing.T) {
	type server struct {
		ToolTimeout int `json:"toolTimeout"`
	}
	var v struct {
		MCPServers map[string]server `json:"mcpServers"`
	}
	tests := []struct{ json, key string }{
		{`{"mcp_servers": {"my_server": {"tool_timeout": "soon"}}}`, "tools.mcp_servers.my_server.tool_timeout"},
		{`{"mcp_servers": {"my_server": {"auth": "oauth"}}}`, "tools.mcp_servers.my_server.auth"},
	}
	for _, tt := range tests {
		f := &File{Tools: []byte(tt.json)}
		err := f.Section("tools", &v)
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != tt.key {
			t.Errorf("Section(%s) = %v, want it to name %s", tt.json, err, tt.key)
		}
	}
}

// TestNanobotUnsetKeys: nanobot's config.json holds every key of its
// schema, most unset; a key nanofleet does not take loads when its value
// asks for nothing (null, "", [], {}; "auto" for apiType).
func TestNanobotUnsetKeys(t *testing.T) {
	doc := `{"agents": {"defaults": {"modelPreset": null, "reasoningEffort": null, "contextBlockLimit": null, "disabledSkills": [],
	                                 "model": "gpt-4o", "provider": "auto"}},
	         "modelPresets": {}, "model_presets": null,
	         "providers": {"openai": {"apiKey": "k", "apiBase": null, "apiType": "auto", "extraHeaders": null, "extraBody": null,
	                                  "extraQuery": null, "proxy": null, "thinkingStyle": null, "display_name": ""}}}`
	f := Defaults()
	if err := Parse(f, []byte(doc), env(nil)); err != nil {
		t.Fatal(err)
	}
	if p := f.Providers["openai"]; p.APIKey != "k" || f.Agents.Defaults.Model != "gpt-4o" {
		t.Errorf("decoded %+v, %+v", p, f.Agents.Defaults)
	}
}

// TestEveryBadKeyAtOnce: a pasted file with several keys nanofleet does
// not take names all of them in one error, the gateway section's too, so
// that one edit fixes them; each still matches ErrInvalid.
func TestEveryBadKeyAtOnce(t *testing.T) {
	data := `{
		"agents": {"defaults": {"memoryWindow": 50, "modle": "x", "maxTokens": 100}},
		"gateway": {"host": "192.168.1.5", "port": 18800},
		"nats": {"replicas": 1}
	}`
	err := Parse(Defaults(), []byte(data), env(nil))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want an invalid config error", err)
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{"agents.defaults.memoryWindow: nanofleet keeps", "agents.defaults.modle: unknown key", "gateway.host: ", "gateway.port: "}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %q, want it to name %q", i, lines[i], w)
		}
	}
	var e *Error
	if !errors.As(err, &e) || e.Key != "agents.defaults.memoryWindow" {
		t.Errorf("errors.As gives %+v, want the first key's *Error", e)
	}
}

// TestEveryBadValueAtOnce: the shared sections' unknown keys, mistyped
// and invalid values are named in one error, a line each (a typo stopped
// the check at the typo, and Validate at the first bad value); unset
// variables likewise.
func TestEveryBadValueAtOnce(t *testing.T) {
	tests := []struct {
		name, json string
		want       []string
	}{
		{"unknown key, bad values", `{
			"agents": {"defaults": {"modle": "x", "maxTokens": 0, "temperature": "hot"}},
			"gateway": {"port": 18800},
			"nats": {"replicas": 9, "tls": {"certFile": "/c.pem"}},
			"observability": {"listen": "::::"}
		}`, []string{
			"agents.defaults.modle: unknown key",
			"agents.defaults.temperature: must be a number, got a string",
			"gateway.port: ",
			"nats.replicas: must be 1..5, got 9",
			"nats.tls.keyFile: must be set with certFile",
			"observability.listen: want host:port",
			"agents.defaults.maxTokens: must be positive, got 0",
		}},
		{"mistyped values", `{"agents": {"defaults": {"maxTokens": "lots", "temperature": "hot", "fallbackModels": ["a", 1, 2]}}, "nats": {"port": "x"}}`,
			[]string{
				"agents.defaults.fallbackModels[1]: must be a string, got a number",
				"agents.defaults.fallbackModels[2]: must be a string, got a number",
				"agents.defaults.maxTokens: must be a whole number, got a string",
				"agents.defaults.temperature: must be a number, got a string",
				"nats.port: must be a whole number, got a string",
			}},
		{"unset variables", `{"providers": {"openai": {"apiKey": "${NO_KEY}", "apiBase": "${NO_BASE}/v1"}}, "agents": {"defaults": {"model": "${NO_MODEL}"}}}`,
			[]string{
				"agents.defaults.model: environment variable NO_MODEL is not set",
				"providers.openai.apiBase: environment variable NO_BASE is not set",
				"providers.openai.apiKey: environment variable NO_KEY is not set",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Parse(Defaults(), []byte(tt.json), env(nil))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want an invalid config error", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(lines[i], "invalid config: "+w) {
					t.Errorf("line %d = %q, want it to begin %q", i, lines[i], w)
				}
			}
		})
	}
}
