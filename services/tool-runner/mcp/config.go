package mcp

import (
	"maps"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
)

// Transport is how the runner talks to an MCP server.
type Transport string

// Transports. The config's "type" also accepts "http", "streamable-http"
// and "streamable_http" for streamable HTTP (the spellings of Cursor,
// VS Code and Claude Code), in any letter case.
const (
	// TransportStdio runs the server as a child process, inside the
	// sandbox, and speaks over its stdin and stdout.
	TransportStdio Transport = "stdio"
	// TransportSSE is the 2024-11-05 HTTP+SSE transport.
	TransportSSE Transport = "sse"
	// TransportStreamableHTTP is the streamable HTTP transport.
	TransportStreamableHTTP Transport = "streamableHttp"
)

// DefaultToolTimeout bounds a call to a server's tool, resource or prompt
// when its config sets no toolTimeout.
const DefaultToolTimeout = 30 * time.Second

// maxToolTimeout is the largest toolTimeout accepted, in seconds.
const maxToolTimeout = 24 * 3600

// maxServerName keeps "mcp_<server>_" short enough that tool names keep
// room for the tool's own name within the 64 characters providers allow.
const maxServerName = 40

// ServerConfig is one entry of tools.mcpServers, in the format Claude
// Desktop, Cursor and nanobot use:
//
//	"mcpServers": {
//	  "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "network": true},
//	  "remote":     {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
//	}
//
// The transport is "type" when set; otherwise stdio when command is set,
// SSE when url's path ends in /sse, streamable HTTP for any other url.
type ServerConfig struct {
	// Type is "stdio", "sse" or "streamableHttp" (also "http"); default
	// inferred from command and url.
	Type string `json:"type,omitempty"`

	// Command starts a stdio server; it is looked up in the sandbox's
	// PATH (/usr/local/bin, /usr/bin, /bin, ...).
	Command string `json:"command,omitempty"`
	// Args are the command's arguments, passed as they are (no shell).
	Args []string `json:"args,omitempty"`
	// Env sets environment variables of a stdio server. Nothing else of
	// the runner's environment reaches it except PATH, HOME (the server's
	// private directory), TMPDIR, LANG and tools.exec.env.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the working directory of a stdio server, a host directory
	// bound read-write into its sandbox; default the server's private
	// directory (<workspace root>-mcp/<name>), which is also its HOME.
	Cwd string `json:"cwd,omitempty"`
	// Network lets a stdio server reach the network (npx -y needs it to
	// download the package; so does any server calling an API). Without
	// it, the server's bubblewrap sandbox has only its own loopback. With
	// tools.exec.sandbox "none" a server always has the host's network.
	Network bool `json:"network,omitempty"`
	// ReadOnlyPaths are host paths bound read-only into a stdio server's
	// sandbox besides the system directories, e.g. where node or the
	// server is installed when that is not under /usr.
	ReadOnlyPaths []string `json:"readOnlyPaths,omitempty"`

	// URL of an SSE or streamable HTTP server.
	URL string `json:"url,omitempty"`
	// Headers are sent with every HTTP request (e.g. Authorization).
	Headers map[string]string `json:"headers,omitempty"`
	// AllowCIDRs are the private ranges a remote server may resolve to
	// (a server on the LAN or on 127.0.0.1); like web_fetch, remote
	// servers may not reach loopback, private, link-local or metadata
	// addresses otherwise.
	AllowCIDRs []string `json:"allowCIDRs,omitempty"`

	// ToolTimeout bounds each call, in seconds; default 30.
	ToolTimeout int `json:"toolTimeout,omitempty"`
	// EnabledTools lists the tools served, by the server's name ("echo")
	// or the wrapped one ("mcp_everything_echo"). Absent or containing
	// "*": every tool, resource and prompt. A list without "*" serves only
	// the tools (and the mcp_<server>_resource_… or mcp_<server>_prompt_…
	// wrappers) it names; an empty list serves nothing.
	EnabledTools []string `json:"enabledTools,omitempty"`
	// Disabled keeps the server configured but not started.
	Disabled bool `json:"disabled,omitempty"`
}

// KeyHints names nanobot's MCP server keys nanofleet does not take.
func (ServerConfig) KeyHints() map[string]string {
	return map[string]string{
		"auth": "nanofleet has no MCP OAuth; send a token in headers (e.g. \"Authorization\": \"Bearer ${TOKEN}\") and remove the key",
	}
}

// serverName: letters, digits, '-' and '_', not starting or ending with
// '_' and without "__" (tool names collapse runs of '_').
var serverName = regexp.MustCompile(`^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$`)

// Transport returns the server's transport: Type when set, otherwise
// inferred as nanobot does. It is "" when neither command nor url says.
func (c ServerConfig) Transport() Transport {
	switch strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(c.Type)) {
	case "stdio":
		return TransportStdio
	case "sse":
		return TransportSSE
	case "streamablehttp", "http":
		return TransportStreamableHTTP
	case "":
	default:
		return Transport(c.Type) // reported by Validate
	}
	switch {
	case c.Command != "":
		return TransportStdio
	case c.URL != "":
		if u, err := url.Parse(c.URL); err == nil && strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/sse") {
			return TransportSSE
		}
		return TransportStreamableHTTP
	}
	return ""
}

// Timeout is the bound of one call to the server.
func (c ServerConfig) Timeout() time.Duration {
	if c.ToolTimeout <= 0 {
		return DefaultToolTimeout
	}
	return config.SecondsDuration(c.ToolTimeout)
}

// allEnabled reports whether every tool, resource and prompt is served.
func (c ServerConfig) allEnabled() bool {
	return c.EnabledTools == nil || slices.Contains(c.EnabledTools, "*")
}

// Validate reports every invalid setting of the server called name, by
// its config key (tools.mcpServers.<name>.<key>), joined.
func (c ServerConfig) Validate(name string) error {
	var p config.Problems
	key := func(k string) string { return "tools.mcpServers." + name + "." + k }
	if !serverName.MatchString(name) || len(name) > maxServerName {
		p.Add("tools.mcpServers."+name, "a server name is at most %d letters, digits, '-' or single '_' between them (it becomes part of tool names mcp_<server>_<tool>)", maxServerName)
	}
	tr := c.Transport()
	switch tr {
	case TransportStdio:
		if c.Command == "" {
			p.Add(key("command"), "required for a stdio server")
		}
		if c.URL != "" {
			p.Add(key("url"), "a stdio server has no url (remove it, or set type to \"sse\" or \"streamableHttp\" and remove command)")
		}
		if len(c.Headers) > 0 || len(c.AllowCIDRs) > 0 {
			p.Add(key("headers"), "headers and allowCIDRs apply to HTTP servers only")
		}
	case TransportSSE, TransportStreamableHTTP:
		if c.URL == "" {
			p.Add(key("url"), "required for an %s server", tr)
		} else if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.Add(key("url"), "%q is not an http:// or https:// URL", c.URL)
		}
		if c.Command != "" || len(c.Args) > 0 || len(c.Env) > 0 || c.Cwd != "" || c.Network || len(c.ReadOnlyPaths) > 0 {
			p.Add(key("command"), "command, args, env, cwd, network and readOnlyPaths apply to stdio servers only; a server has either a command or a url")
		}
	case "":
		p.Add("tools.mcpServers."+name, "set command (a stdio server) or url (an SSE or streamable HTTP server)")
	default:
		p.Add(key("type"), "%q is not \"stdio\", \"sse\" or \"streamableHttp\"", c.Type)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		if !sandbox.ValidEnvName(k) {
			p.Add(key("env"), "%q is not an environment variable name", k)
		}
	}
	if c.Cwd != "" && !filepath.IsAbs(c.Cwd) {
		p.Add(key("cwd"), "%q must be an absolute path", c.Cwd)
	}
	for _, path := range c.ReadOnlyPaths {
		if !filepath.IsAbs(path) || filepath.Clean(path) == "/" {
			p.Add(key("readOnlyPaths"), "%q must be an absolute path other than /", path)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Headers)) {
		if !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(c.Headers[k]) {
			p.Add(key("headers"), "%q is not a valid HTTP header", k)
		}
	}
	for _, s := range c.AllowCIDRs {
		if _, err := netip.ParsePrefix(s); err != nil {
			p.Add(key("allowCIDRs"), "%q is not a CIDR prefix such as 10.0.0.0/8", s)
		}
	}
	if c.ToolTimeout < 0 || c.ToolTimeout > maxToolTimeout {
		p.Add(key("toolTimeout"), "%d s is not between 1 and %d (0 means the default, 30)", c.ToolTimeout, maxToolTimeout)
	}
	for _, t := range c.EnabledTools {
		if strings.TrimSpace(t) == "" {
			p.Add(key("enabledTools"), "empty name")
		}
	}
	return p.Err()
}

// ValidateServers validates every server of tools.mcpServers and checks
// that no server name followed by '_' begins another one ("a" and "a_b"
// would both claim the tool name mcp_a_b_c).
func ValidateServers(servers map[string]ServerConfig) error {
	names := slices.Sorted(maps.Keys(servers))
	var p config.Problems
	for _, name := range names {
		p.Join(servers[name].Validate(name))
	}
	for _, a := range names {
		for _, b := range names {
			if a != b && strings.HasPrefix(strings.ToLower(b), strings.ToLower(a)+"_") {
				p.Add("tools.mcpServers."+b, "the name begins with that of server %q and '_', so their tool names could clash; rename one", a)
			}
		}
	}
	return p.Err()
}
