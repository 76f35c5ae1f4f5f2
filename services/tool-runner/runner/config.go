package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/wsfile"
	"github.com/nanofleet/nanofleet/services/tool-runner/mcp"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/shell"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/web"
)

// WorkspaceConfig is tools.workspace.
type WorkspaceConfig struct {
	// Root is the default agent's workspace; other agents' and sessions'
	// workspaces are created beside it, in <root>-agents and
	// <root>-sessions.
	Root string `json:"root"`
	// PerSession gives each session its own workspace instead of one per
	// agent.
	PerSession bool `json:"perSession"`
	// EditableProfile lets sessions change the agent's bootstrap files
	// (AGENTS.md, SOUL.md, USER.md, TOOLS.md, IDENTITY.md, HEARTBEAT.md)
	// and skills/ in the workspace, and makes the workspace the profile's
	// source at every start, as in nanobot. Off by default: one session
	// must not rewrite every session's system prompt.
	EditableProfile bool `json:"editableProfile"`
	// QuotaBytes and QuotaFiles bound what one workspace holds: bytes
	// of disk and files (directories included). A tool call that would go
	// beyond is refused; an exec that went beyond is reported and further
	// writes are refused until files are deleted. 0 means no quota.
	QuotaBytes int64 `json:"quotaBytes"`
	QuotaFiles int64 `json:"quotaFiles"`
}

// ServiceConfig is tools.runner.
type ServiceConfig struct {
	// HeartbeatMs is the interval of heartbeats during a call.
	HeartbeatMs int `json:"heartbeatMs"`
	// MaxConcurrent bounds the calls one runner runs at once.
	MaxConcurrent int `json:"maxConcurrent"`
	// CallTimeout bounds a call whose request sets no timeout, in seconds.
	CallTimeout int `json:"callTimeout"`
	// OversizeChars: longer results are stored and previewed.
	OversizeChars int `json:"oversizeChars"`
	// PreviewChars is the length of that preview.
	PreviewChars int `json:"previewChars"`
}

// Config is the tool-runner's slice of the fleet config, the "tools"
// section: {"tools": {"workspace": ..., "exec": ..., "web": ..., "runner": ...,
// "mcpServers": ...}}.
type Config struct {
	Workspace WorkspaceConfig `json:"workspace"`
	Exec      shell.Config    `json:"exec"`
	Web       web.Config      `json:"web"`
	Runner    ServiceConfig   `json:"runner"`
	// MCPServers are the MCP servers whose tools, resources and prompts
	// this runner serves, by name; see package mcp.
	MCPServers map[string]mcp.ServerConfig `json:"mcpServers,omitempty"`
	// RestrictToWorkspace is nanobot's switch keeping tools in the
	// workspace. nanofleet's file tools always are, and exec is in its
	// sandbox: true is accepted (unless the sandbox is off), false
	// refused.
	RestrictToWorkspace *bool `json:"restrictToWorkspace,omitempty"`
}

// KeyHints names nanobot's tools keys nanofleet does not take.
func (Config) KeyHints() map[string]string {
	const remove = "nanofleet has no such tool setting; remove the key"
	return map[string]string{
		"ssrfWhitelist":                  "use tools.web.fetch.allowCIDRs (and allowCIDRs of a remote MCP server)",
		"file":                           "nanofleet's file tools are always on, in the workspace; remove the section",
		"imageGeneration":                "nanofleet has no image generation tool; remove the section",
		"cliApps":                        remove,
		"my":                             remove,
		"maxSessionMessagesPerMinute":    remove,
		"webuiAllowLocalServiceAccess":   remove,
		"webuiAllowRemotePackageInstall": remove,
		"allowLocalPreviewAccess":        remove,
	}
}

// NanobotDefaults gives the tools keys nanobot 0.3 writes by default.
func (Config) NanobotDefaults() map[string][]any {
	return map[string][]any{
		"file":                           {map[string]any{"enable": true}},
		"cliApps":                        {map[string]any{"enable": true, "installTimeout": 300, "runTimeout": 60, "catalogTtlSeconds": 3600}},
		"my":                             {map[string]any{"enable": true, "allowSet": false}},
		"maxSessionMessagesPerMinute":    {6},
		"webuiAllowLocalServiceAccess":   {true},
		"webuiAllowRemotePackageInstall": {false},
		"imageGeneration": {map[string]any{"enabled": false, "provider": "openrouter", "model": "openai/gpt-5.4-image-2",
			"defaultAspectRatio": "1:1", "defaultImageSize": "1K", "maxImagesPerTurn": 4, "saveDir": "generated"}},
	}
}

// DefaultConfig is a per-agent workspace under ~/.nanofleet/workspace, the
// bubblewrap sandbox without network, DuckDuckGo search.
func DefaultConfig() Config {
	root := "workspace"
	if home, err := os.UserHomeDir(); err == nil {
		root = filepath.Join(home, ".nanofleet", "workspace")
	}
	return Config{
		Workspace: WorkspaceConfig{Root: root, QuotaBytes: 1 << 30, QuotaFiles: 100_000},
		Exec:      shell.DefaultConfig(),
		Web:       web.DefaultConfig(),
		Runner: ServiceConfig{
			HeartbeatMs:   1000,
			MaxConcurrent: 32,
			CallTimeout:   900,
			OversizeChars: 16_000,
			PreviewChars:  4_000,
		},
	}
}

// FromFile decodes the file's "tools" section over [DefaultConfig] and
// validates it. workspace, when set, replaces tools.workspace.root (the
// --workspace flag, or the all-in-one's workspace).
func FromFile(file *config.File, workspace string) (Config, error) {
	cfg := DefaultConfig()
	// A key the decode refused leaves its default; the rest is checked
	// too, so that one start names every problem of the section.
	err := file.Section("tools", &cfg)
	if workspace != "" {
		cfg.Workspace.Root = workspace
	}
	return cfg, errors.Join(err, cfg.Validate())
}

// Validate reports every invalid setting by its config key, joined.
func (c Config) Validate() error {
	var p config.Problems
	w := c.Workspace
	if w.Root == "" {
		p.Add("tools.workspace.root", "required")
	} else if err := wsfile.CheckWorkspaceRoot(w.Root); err != nil {
		p.Add("tools.workspace.root", "%v (agents.defaults.workspace or --workspace set it in the all-in-one)", err)
	}
	switch {
	case w.QuotaBytes < 0:
		p.Add("tools.workspace.quotaBytes", "%d is negative (0 means no quota)", w.QuotaBytes)
	case w.QuotaBytes > 0 && w.QuotaBytes < 1<<20:
		p.Add("tools.workspace.quotaBytes", "%d is below 1 MiB (1048576)", w.QuotaBytes)
	}
	switch {
	case w.QuotaFiles < 0:
		p.Add("tools.workspace.quotaFiles", "%d is negative (0 means no quota)", w.QuotaFiles)
	case w.QuotaFiles > 0 && w.QuotaFiles < 100:
		p.Add("tools.workspace.quotaFiles", "%d is below 100", w.QuotaFiles)
	}
	p.Join(c.Exec.Validate())
	switch r := c.RestrictToWorkspace; {
	case r != nil && !*r:
		p.Add("tools.restrictToWorkspace", "nanofleet's tools always stay in the workspace (exec in its sandbox); remove the key or set it to true")
	case r != nil && c.Exec.Sandbox == sandbox.ModeNone:
		p.Add("tools.restrictToWorkspace", "exec can leave the workspace with tools.exec.sandbox \"none\"; use \"bwrap\" or remove this key")
	}
	p.Join(c.Web.Validate())
	p.Join(mcp.ValidateServers(c.MCPServers))
	r := c.Runner
	if r.HeartbeatMs < 10 || r.HeartbeatMs > 60_000 {
		p.Add("tools.runner.heartbeatMs", "%d not between 10 and 60000", r.HeartbeatMs)
	}
	if r.MaxConcurrent < 1 {
		p.Add("tools.runner.maxConcurrent", "%d must be at least 1", r.MaxConcurrent)
	}
	if r.CallTimeout < c.Exec.MaxTimeout {
		p.Add("tools.runner.callTimeout", "%d s is below tools.exec.maxTimeout (%d s)", r.CallTimeout, c.Exec.MaxTimeout)
	}
	oversizeOK := r.OversizeChars >= 1000
	if !oversizeOK {
		p.Add("tools.runner.oversizeChars", "%d is below 1000", r.OversizeChars)
	}
	if r.PreviewChars < 100 || (oversizeOK && r.PreviewChars >= r.OversizeChars) {
		p.Add("tools.runner.previewChars", "%d must be at least 100 and below tools.runner.oversizeChars (%d)", r.PreviewChars, r.OversizeChars)
	}
	return p.Err()
}

// SharedDiskWarning returns a warning when the workspaces and dataDir
// (the JetStream store) are on one file system and nothing bounds what
// sessions write there: no quota, or one quota per session with no bound
// on the number of sessions. A full store stops the fleet. "" otherwise.
func SharedDiskWarning(w WorkspaceConfig, dataDir string) string {
	if !sameDevice(w.Root, dataDir) {
		return ""
	}
	switch {
	case w.QuotaBytes == 0:
		return fmt.Sprintf("the workspaces (%s) and the data directory (%s) share a file system and tools.workspace.quotaBytes is 0: a session can fill the disk the JetStream store needs; set a quota or move one of them", w.Root, dataDir)
	case w.PerSession:
		return fmt.Sprintf("the workspaces (%s) and the data directory (%s) share a file system and tools.workspace.perSession gives every session its own %d-byte quota, so many sessions together can fill the disk the JetStream store needs; use a file system quota or move one of them", w.Root, dataDir, w.QuotaBytes)
	}
	return ""
}

// sameDevice reports whether a and b (or their nearest existing
// parents) are on one file system.
func sameDevice(a, b string) bool {
	adev, ok1 := device(a)
	bdev, ok2 := device(b)
	return ok1 && ok2 && adev == bdev
}

// device is the device of p or of its nearest existing parent.
func device(p string) (uint64, bool) {
	p, err := filepath.Abs(p)
	if err != nil {
		return 0, false
	}
	for {
		fi, err := os.Stat(p)
		if err == nil {
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return 0, false
			}
			return uint64(st.Dev), true
		}
		if p == filepath.Dir(p) {
			return 0, false
		}
		p = filepath.Dir(p)
	}
}
