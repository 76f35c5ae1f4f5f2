package runner_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/config/configtest"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
)

func fromNanobot(data string) (runner.Config, error) {
	file := config.Defaults()
	if err := config.Parse(file, []byte(data), func(string) string { return "" }); err != nil {
		return runner.Config{}, err
	}
	return runner.FromFile(file, "/srv/ws")
}

// TestNanobotToolsSection: a pasted nanobot tools section, in camelCase
// or snake_case, with a Claude Desktop mcpServers block, loads the same;
// keys nanofleet does not take load when unset (null, "", []), as
// nanobot writes them.
func TestNanobotToolsSection(t *testing.T) {
	cfg, err := fromNanobot(`{"tools": {
		"restrict_to_workspace": true, "ssrfWhitelist": [],
		"exec": {"timeout": 30, "deny_patterns": ["rm -rf /"], "pathAppend": "", "allowPatterns": [], "sandboxRoBinds": []},
		"web": {"proxy": null, "userAgent": null, "search": {"provider": "brave", "api_key": "k", "max_results": 3, "base_url": "https://search.example/v1"}},
		"mcp_servers": {
			"github_tools": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "t"}, "tool_timeout": 10, "enabled_tools": ["create_issue"]},
			"remote": {"url": "https://example.com/mcp/", "headers": {"X_Api_Key": "h"}}
		}
	}}`)
	if err != nil {
		t.Fatal(err)
	}
	gh, remote := cfg.MCPServers["github_tools"], cfg.MCPServers["remote"]
	switch {
	case cfg.RestrictToWorkspace == nil || !*cfg.RestrictToWorkspace || cfg.Exec.Timeout != 30 || cfg.Exec.DenyPatterns[0] != "rm -rf /":
		t.Errorf("exec = %+v", cfg.Exec)
	case cfg.Web.Search.APIKey != "k" || cfg.Web.Search.MaxResults != 3 || cfg.Web.Search.BaseURL != "https://search.example/v1":
		t.Errorf("web = %+v", cfg.Web)
	case gh.Command != "npx" || gh.Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "t" || gh.ToolTimeout != 10 || gh.EnabledTools[0] != "create_issue":
		t.Errorf("stdio server = %+v", gh)
	case remote.Headers["X_Api_Key"] != "h" || remote.Transport() != "streamableHttp":
		t.Errorf("remote server = %+v", remote)
	}
}

// TestNanobotToolsKeysRefused: a tools key nanobot documents and
// nanofleet does not take fails naming its path and what to use instead.
func TestNanobotToolsKeysRefused(t *testing.T) {
	tests := []struct{ json, key, says string }{
		{`{"tools": {"restrictToWorkspace": false}}`, "tools.restrictToWorkspace", "always stay in the workspace"},
		{`{"tools": {"restrictToWorkspace": true, "exec": {"sandbox": "none"}}}`, "tools.restrictToWorkspace", "bwrap"},
		{`{"tools": {"ssrfWhitelist": ["100.64.0.0/10"]}}`, "tools.ssrfWhitelist", "tools.web.fetch.allowCIDRs"},
		{`{"tools": {"ssrf_whitelist": ["10.0.0.0/8"]}}`, "tools.ssrf_whitelist", "tools.web.fetch.allowCIDRs"},
		{`{"tools": {"imageGeneration": {"enabled": false}}}`, "tools.imageGeneration", "remove the section"},
		{`{"tools": {"exec": {"allowedEnvKeys": ["GOPATH"]}}}`, "tools.exec.allowedEnvKeys", "tools.exec.env"},
		{`{"tools": {"exec": {"pathAppend": "/usr/sbin"}}}`, "tools.exec.pathAppend", "remove the key"},
		{`{"tools": {"exec": {"enable": false}}}`, "tools.exec.enable", "remove the key"},
		{`{"tools": {"exec": {"timeout": 60, "restrictToWorkspace": false}}}`, "tools.exec.restrictToWorkspace", "tools.restrictToWorkspace"},
		{`{"tools": {"web": {"proxy": "http://127.0.0.1:7890"}}}`, "tools.web.proxy", "remove the key"},
		{`{"tools": {"web": {"userAgent": "x"}}}`, "tools.web.userAgent", "tools.web.fetch.userAgent"},
		{`{"tools": {"web": {"fetch": {"useJinaReader": false}}}}`, "tools.web.fetch.useJinaReader", "remove the key"},
		{`{"tools": {"mcpServers": {"r": {"url": "https://x.example/mcp", "auth": "oauth"}}}}`, "tools.mcpServers.r.auth", "headers"},
		{`{"tools": {"mcpServers": {"r": {"url": "https://x.example/mcp", "toolTimeout": 5, "tool_timeout": 6}}}}`, "tools.mcpServers.r.tool_timeout", "keep one"},
		{`{"tools": {"exec": {"timeot": 5}}}`, "tools.exec.timeot", "check spelling"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			_, err := fromNanobot(tt.json)
			var ce *config.Error
			if !errors.Is(err, config.ErrInvalid) || !errors.As(err, &ce) || ce.Key != tt.key || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("%s: error = %v, want one naming %s and saying %q", tt.json, err, tt.key, tt.says)
			}
		})
	}
}

// TestEveryToolsProblemAtOnce: the tools section's unknown keys and bad
// values are named in one error, a line each, whichever part of the
// section they are in (it named the first: the sandbox's, or a typo
// alone).
func TestEveryToolsProblemAtOnce(t *testing.T) {
	tests := []struct {
		name, json string
		want       []string
	}{
		{"two of exec", `{"tools": {"exec": {"timeout": -5, "sandbox": "docker"}}}`, []string{
			`tools.exec.sandbox: "docker" is not "bwrap" or "none"`,
			"tools.exec.timeout: -5 s is not between 1 and tools.exec.maxTimeout (600)",
		}},
		{"a typo and values in every part", `{"tools": {
			"exec": {"timeot": 5, "maxOutputChars": 10, "limits": {"openFiles": 3, "processes": -1}},
			"web": {"search": {"maxResults": 11}, "fetch": {"allowCIDRs": ["x", "y"]}},
			"mcpServers": {"a": {"url": "ftp://x", "toolTimeout": -1}},
			"runner": {"heartbeatMs": 5, "previewChars": 10}
		}}`, []string{
			"tools.exec.timeot: unknown key",
			"tools.exec.limits.processes: -1 is negative",
			"tools.exec.limits.openFiles: 3 is too low",
			"tools.exec.maxOutputChars: 10 is below 100",
			"tools.web.search.maxResults: 11 is not between 1 and 10",
			`tools.web.fetch.allowCIDRs: "x" is not a CIDR prefix`,
			`tools.web.fetch.allowCIDRs: "y" is not a CIDR prefix`,
			`tools.mcpServers.a.url: "ftp://x" is not an http:// or https:// URL`,
			"tools.mcpServers.a.toolTimeout: -1 s is not between 1 and",
			"tools.runner.heartbeatMs: 5 not between 10 and 60000",
			"tools.runner.previewChars: 10 must be at least 100",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fromNanobot(tt.json)
			configtest.WantProblems(t, err, tt.want...)
		})
	}
}
