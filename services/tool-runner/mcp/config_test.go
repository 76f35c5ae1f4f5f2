package mcp_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/tool-runner/mcp"
)

func TestTransportInference(t *testing.T) {
	cases := []struct {
		json string
		want mcp.Transport
	}{
		{`{"command":"npx","args":["-y","@modelcontextprotocol/server-everything"]}`, mcp.TransportStdio},
		{`{"url":"https://mcp.example.com/sse"}`, mcp.TransportSSE},
		{`{"url":"https://mcp.example.com/sse/"}`, mcp.TransportSSE},
		{`{"url":"https://mcp.example.com/sse?key=1"}`, mcp.TransportSSE},
		{`{"url":"https://mcp.example.com/mcp"}`, mcp.TransportStreamableHTTP},
		{`{"url":"https://mcp.example.com/ssex"}`, mcp.TransportStreamableHTTP},
		{`{"type":"streamableHttp","url":"https://mcp.example.com/sse"}`, mcp.TransportStreamableHTTP},
		{`{"type":"http","url":"https://x"}`, mcp.TransportStreamableHTTP},
		{`{"type":"streamable-http","url":"https://x"}`, mcp.TransportStreamableHTTP},
		{`{"type":"SSE","url":"https://x"}`, mcp.TransportSSE},
		{`{"type":"stdio","command":"x"}`, mcp.TransportStdio},
		{`{}`, ""},
	}
	for _, c := range cases {
		var sc mcp.ServerConfig
		if err := json.Unmarshal([]byte(c.json), &sc); err != nil {
			t.Fatal(err)
		}
		if got := sc.Transport(); got != c.want {
			t.Errorf("%s: transport %q, want %q", c.json, got, c.want)
		}
	}
}

func TestServerConfigValidate(t *testing.T) {
	cases := []struct {
		name, json string
		key        string // in the error; "" = valid
	}{
		{"everything", `{"command":"npx","args":["-y","@modelcontextprotocol/server-everything"],"env":{"API_KEY":"x"},"toolTimeout":60,"enabledTools":["echo"]}`, ""},
		{"remote", `{"url":"https://mcp.example.com/mcp","headers":{"Authorization":"Bearer x"},"allowCIDRs":["10.0.0.0/8"]}`, ""},
		{"brave-search", `{"command":"x","cwd":"/srv","readOnlyPaths":["/opt/node"],"network":true}`, ""},
		{"a_b", `{"command":"x"}`, ""},
		{"bad name", `{"command":"x"}`, "tools.mcpServers.bad name"},
		{"a__b", `{"command":"x"}`, "tools.mcpServers.a__b"},
		{"trailing_", `{"command":"x"}`, "tools.mcpServers.trailing_"},
		{strings.Repeat("n", 41), `{"command":"x"}`, "tools.mcpServers.nnn"},
		{"s", `{}`, "tools.mcpServers.s: "},
		{"s", `{"type":"websocket","url":"wss://x"}`, "tools.mcpServers.s.type"},
		{"s", `{"type":"stdio","url":"https://x"}`, "tools.mcpServers.s.command"},
		{"s", `{"command":"x","url":"https://x"}`, "tools.mcpServers.s.url"},
		{"s", `{"command":"x","headers":{"A":"b"}}`, "tools.mcpServers.s.headers"},
		{"s", `{"url":"ftp://x/mcp"}`, "tools.mcpServers.s.url"},
		{"s", `{"url":"https://x/mcp","env":{"A":"b"}}`, "tools.mcpServers.s.command"},
		{"s", `{"command":"x","env":{"1A":"b"}}`, "tools.mcpServers.s.env"},
		{"s", `{"command":"x","cwd":"relative"}`, "tools.mcpServers.s.cwd"},
		{"s", `{"command":"x","readOnlyPaths":["/"]}`, "tools.mcpServers.s.readOnlyPaths"},
		{"s", `{"url":"https://x","headers":{"Bad Header":"v"}}`, "tools.mcpServers.s.headers"},
		{"s", `{"url":"https://x","headers":{"X":"a\r\nb"}}`, "tools.mcpServers.s.headers"},
		{"s", `{"url":"https://x","allowCIDRs":["10.0.0.1"]}`, "tools.mcpServers.s.allowCIDRs"},
		{"s", `{"command":"x","toolTimeout":-1}`, "tools.mcpServers.s.toolTimeout"},
		{"s", `{"command":"x","enabledTools":[""]}`, "tools.mcpServers.s.enabledTools"},
	}
	for _, c := range cases {
		var sc mcp.ServerConfig
		if err := json.Unmarshal([]byte(c.json), &sc); err != nil {
			t.Fatal(err)
		}
		err := sc.Validate(c.name)
		switch {
		case c.key == "" && err != nil:
			t.Errorf("%s %s: %v", c.name, c.json, err)
		case c.key != "" && (err == nil || !strings.Contains(err.Error(), c.key) || !errors.Is(err, config.ErrInvalid)):
			t.Errorf("%s %s: error %v, want one naming %s", c.name, c.json, err, c.key)
		}
	}
}

func TestValidateServersPrefixes(t *testing.T) {
	ok := map[string]mcp.ServerConfig{"github": {Command: "x"}, "git": {Command: "x"}, "git-lab": {Command: "x"}}
	if err := mcp.ValidateServers(ok); err != nil {
		t.Errorf("%v", err)
	}
	clash := map[string]mcp.ServerConfig{"a": {Command: "x"}, "a_b": {Command: "x"}}
	if err := mcp.ValidateServers(clash); err == nil || !strings.Contains(err.Error(), "tools.mcpServers.a_b") {
		t.Errorf("a and a_b: %v", err)
	}
}

func TestToolTimeoutDefault(t *testing.T) {
	if d := (mcp.ServerConfig{}).Timeout(); d != 30*time.Second {
		t.Errorf("default %s", d)
	}
	if d := (mcp.ServerConfig{ToolTimeout: 5}).Timeout(); d != 5*time.Second {
		t.Errorf("5: %s", d)
	}
}
