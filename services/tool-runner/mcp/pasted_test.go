package mcp

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
)

// TestPastedConfigFitsTheSandbox: blocks as Claude Desktop and Cursor
// users paste them either start as they are or fail with one line that
// names the server's key and says what to change.
func TestPastedConfigFitsTheSandbox(t *testing.T) {
	modules := t.TempDir()
	pkgDir := filepath.Join(modules, "@modelcontextprotocol", "server-memory")
	if err := os.MkdirAll(pkgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkgDir, "package.json"), []byte(`{"bin":{"mcp-server-memory":"dist/index.js"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// Packages with several executables: npx runs the one named as the
	// package, and cannot choose among others.
	for dir, bin := range map[string]string{
		"@acme/tools":   `{"bin":{"tools-admin":"a.js","tools":"t.js","tools-debug":"d.js"}}`,
		"two-bins":      `{"bin":{"b-server":"b.js","a-server":"a.js"}}`,
		"single-string": `{"name":"single-string","bin":"cli.js"}`,
	} {
		if err := os.MkdirAll(filepath.Join(modules, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(modules, dir, "package.json"), []byte(bin), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A host directory the sandbox does not show (t.TempDir is not
	// /usr, the server's home or the sandbox's own /tmp).
	hostDir, home := t.TempDir(), t.TempDir()
	bwrap, none := sandbox.DefaultConfig(), sandbox.DefaultConfig()
	bwrap.Sandbox, none.Sandbox = sandbox.ModeBwrap, sandbox.ModeNone
	tests := []struct {
		name    string
		c       ServerConfig
		sb      sandbox.Config
		wantErr []string // substrings; none: it fits
	}{
		{"npx -y, installed", ServerConfig{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}}, bwrap,
			[]string{"tools.mcpServers.memory", "no network", `"command": "mcp-server-memory", "args": []`, `"network": true`}},
		{"npx, installed with several executables, one named as the package", ServerConfig{Command: "npx", Args: []string{"-y", "@acme/tools@1.2.0", "--port", "1"}}, bwrap,
			[]string{`"command": "tools", "args": ["--port","1"]`}},
		{"npx, installed with several executables, none named as the package", ServerConfig{Command: "npx", Args: []string{"two-bins"}}, bwrap,
			[]string{`(one of a-server, b-server)`, `"network": true`}},
		{"npx, installed with a single bin path", ServerConfig{Command: "npx", Args: []string{"-y", "single-string"}}, bwrap,
			[]string{`"command": "single-string"`}},
		{"npx -y, not installed", ServerConfig{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/data"}}, bwrap,
			[]string{"npm install -g @modelcontextprotocol/server-filesystem", `"network": true`}},
		{"uvx", ServerConfig{Command: "uvx", Args: []string{"mcp-server-fetch"}}, bwrap,
			[]string{"uv tool install mcp-server-fetch", `"command": "mcp-server-fetch"`}},
		{"pnpm dlx", ServerConfig{Command: "pnpm", Args: []string{"dlx", "some-server"}}, bwrap, []string{"pnpm dlx some-server", "no network"}},
		{"npx with network", ServerConfig{Command: "npx", Args: []string{"-y", "x"}, Network: true}, bwrap, nil},
		{"npx unsandboxed", ServerConfig{Command: "npx", Args: []string{"-y", "x"}}, none, nil},
		{"installed command", ServerConfig{Command: "mcp-server-memory"}, bwrap, nil},
		{"remote", ServerConfig{URL: "https://mcp.example.com/mcp"}, bwrap, nil},
		{"host directory argument", ServerConfig{Command: "mcp-server-filesystem", Args: []string{hostDir}}, bwrap,
			[]string{"tools.mcpServers.memory.args[0]", hostDir, `"readOnlyPaths"`, `"cwd": "` + hostDir + `"`}},
		{"host directory as an option's value", ServerConfig{Command: "srv", Args: []string{"--verbose", "--root=" + hostDir}}, bwrap,
			[]string{"tools.mcpServers.memory.args[1]", hostDir}},
		{"npx and a host directory, with network", ServerConfig{Command: "npx", Args: []string{"-y", "x", hostDir}, Network: true}, bwrap,
			[]string{"args[2]", hostDir}},
		{"host directory bound read-only", ServerConfig{Command: "mcp-server-filesystem", Args: []string{hostDir + "/"}, ReadOnlyPaths: []string{hostDir}}, bwrap, nil},
		{"host directory as cwd", ServerConfig{Command: "mcp-server-filesystem", Args: []string{hostDir}, Cwd: hostDir}, bwrap, nil},
		{"the server's own directory", ServerConfig{Command: "mcp-server-filesystem", Args: []string{home}}, bwrap, nil},
		{"a system path", ServerConfig{Command: "node", Args: []string{"/usr/lib/node_modules/x/dist/index.js", "/usr"}}, bwrap, nil},
		{"a path that does not exist on the host", ServerConfig{Command: "srv", Args: []string{filepath.Join(hostDir, "absent")}}, bwrap, nil},
		{"host directory unsandboxed", ServerConfig{Command: "mcp-server-filesystem", Args: []string{hostDir}}, none, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSandboxFit("memory", tt.c, tt.sb, []string{modules}, home)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("err = %v, want an invalid config error", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is more than one line: %q", err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestDataPathEnv(t *testing.T) {
	tests := []struct {
		name    string
		c       ServerConfig
		wantKey string
	}{
		{"npx package", ServerConfig{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory@2026.8.31"}}, "MEMORY_FILE_PATH"},
		{"installed bin", ServerConfig{Command: "/usr/bin/mcp-server-memory"}, "MEMORY_FILE_PATH"},
		{"set by the user", ServerConfig{Command: "mcp-server-memory", Env: map[string]string{"MEMORY_FILE_PATH": "/x"}}, ""},
		{"another server", ServerConfig{Command: "mcp-server-filesystem"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, v, ok := dataPathEnv(tt.c, "/srv/mcp/memory")
			if k != tt.wantKey || ok != (tt.wantKey != "") {
				t.Fatalf("dataPathEnv = %q, %q, %v; want key %q", k, v, ok, tt.wantKey)
			}
			if ok && v != "/srv/mcp/memory/memory.jsonl" {
				t.Fatalf("value %q, want a file in the server's home", v)
			}
		})
	}
}
