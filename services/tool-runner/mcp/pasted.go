package mcp

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
)

// This file makes the mcpServers blocks users paste from Claude Desktop or
// Cursor work in the sandbox, or fail at start with what to change: there
// a server runs with the user's network and files, here without network
// and with a read-only system.

// globalNodeModules are where `npm install -g` puts packages (Debian's
// node, then a node installed under /usr/local); both are inside the
// sandbox's read-only system binds.
var globalNodeModules = []string{"/usr/lib/node_modules", "/usr/local/lib/node_modules"}

// checkSandboxFit returns an error naming the server's key when the
// server, as configured, cannot start in sandbox: a package runner (npx,
// uvx, …) that downloads the server at each start without network, or an
// argument naming a host path the sandbox does not show the server (home
// is its private directory).
func checkSandboxFit(name string, c ServerConfig, sb sandbox.Config, nodeModules []string, home string) error {
	if c.Transport() != TransportStdio || sb.Sandbox == sandbox.ModeNone {
		return nil
	}
	if err := checkHostPaths(name, c, home); err != nil {
		return err
	}
	runner, pkg, rest := packageRunner(c)
	if runner == "" || c.Network {
		return nil
	}
	fix := `grant "network": true to let it download`
	switch {
	case runner == "npx" && pkg != "":
		if bins := installedNodeBins(nodeModules, pkg); len(bins) == 1 {
			fix = fmt.Sprintf(`it is installed, so set "command": %q, "args": %s; or grant "network": true`, bins[0], jsonArgs(rest))
		} else if len(bins) > 1 {
			fix = fmt.Sprintf(`it is installed, so set "command" to the executable to run (one of %s), "args": %s; or grant "network": true`, strings.Join(bins, ", "), jsonArgs(rest))
		} else {
			fix = fmt.Sprintf(`install it first (npm install -g %s), then set "command" to its executable (e.g. mcp-server-… in /usr/bin) without npx; or grant "network": true`, pkg)
		}
	case runner == "uvx" && pkg != "":
		fix = fmt.Sprintf(`install it first (uv tool install %s, with UV_TOOL_BIN_DIR=/usr/local/bin) and set "command": %q; or grant "network": true`, pkg, pkg)
	}
	return config.Invalid("tools.mcpServers."+name, "%q downloads the server at every start, but the sandbox has no network: %s",
		strings.Join(append([]string{filepath.Base(c.Command)}, c.Args...), " "), fix)
}

// checkHostPaths refuses an argument that names an existing host path
// outside what the server's sandbox binds, as Claude Desktop's
// filesystem server block does ("args": [..., "/Users/me/Desktop"]):
// the server would start, find nothing there and exit, again and again.
// Arguments that name no existing host path are the server's business.
func checkHostPaths(name string, c ServerConfig, home string) error {
	shows := func(p string) bool {
		if sandbox.SystemShows(p, c.Network) || sandbox.Within(p, home) || (c.Cwd != "" && sandbox.Within(p, filepath.Clean(c.Cwd))) {
			return true
		}
		return slices.ContainsFunc(c.ReadOnlyPaths, func(ro string) bool { return sandbox.Within(p, filepath.Clean(ro)) })
	}
	for i, a := range c.Args {
		// "--root=/srv/data" names a path as much as "/srv/data" does.
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "-") {
			a = v
		}
		if !filepath.IsAbs(a) {
			continue
		}
		p := filepath.Clean(a)
		if _, err := os.Stat(p); err != nil || shows(p) {
			continue
		}
		return config.Invalid(fmt.Sprintf("tools.mcpServers.%s.args[%d]", name, i),
			"%q is a host path the server cannot see in its sandbox (which shows it a read-only system, its private directory and its cwd): list it in \"readOnlyPaths\" to let it read there, or set \"cwd\": %q and pass \".\" to let it write there", a, p)
	}
	return nil
}

// packageRunner recognises a command that fetches its package when run:
// npx, bunx, pnpm dlx, yarn dlx, uvx, pipx run. It returns the runner,
// the package (the first argument that is not an option) and the
// arguments after it.
func packageRunner(c ServerConfig) (runner, pkg string, rest []string) {
	args := c.Args
	switch base := filepath.Base(c.Command); base {
	case "npx", "bunx", "uvx":
		runner = base
	case "pnpm", "yarn":
		if len(args) == 0 || args[0] != "dlx" {
			return "", "", nil
		}
		runner, args = base+" dlx", args[1:]
	case "pipx":
		if len(args) == 0 || args[0] != "run" {
			return "", "", nil
		}
		runner, args = "pipx run", args[1:]
	default:
		return "", "", nil
	}
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			return runner, a, args[i+1:]
		}
	}
	return runner, "", nil
}

// installedNodeBins is the executable npx would run of a globally
// installed npm package: its only "bin" entry, or among several the one
// named as the package (without its scope). Several without that one are
// all returned, sorted, for the user to choose; nil when the package is
// not installed or has none.
func installedNodeBins(nodeModules []string, pkg string) []string {
	name := pkg
	// "@scope/name@1.2.3" and "name@latest" name the package before the version.
	if i := strings.LastIndex(name, "@"); i > 0 {
		name = name[:i]
	}
	for _, dir := range nodeModules {
		data, err := os.ReadFile(filepath.Join(dir, name, "package.json"))
		if err != nil {
			continue
		}
		var meta struct {
			Bin json.RawMessage `json:"bin"`
		}
		if json.Unmarshal(data, &meta) != nil {
			continue
		}
		var one string
		if json.Unmarshal(meta.Bin, &one) == nil && one != "" {
			return []string{path.Base(name)}
		}
		var many map[string]string
		if json.Unmarshal(meta.Bin, &many) != nil || len(many) == 0 {
			continue
		}
		if _, ok := many[path.Base(name)]; ok {
			return []string{path.Base(name)}
		}
		return slices.Sorted(maps.Keys(many)) // one entry: that one
	}
	return nil
}

func jsonArgs(args []string) string {
	if args == nil {
		args = []string{}
	}
	data, _ := json.Marshal(args)
	return string(data)
}

// dataPathDefaults are environment variables of well-known servers that
// otherwise write beside their code, which the sandbox mounts read-only:
// they default to a file in the server's private directory.
var dataPathDefaults = map[string]struct{ env, file string }{
	"server-memory": {"MEMORY_FILE_PATH", "memory.jsonl"},
}

// dataPathEnv returns the variable and value a well-known server needs to
// write its data in home, when its config does not set it.
func dataPathEnv(c ServerConfig, home string) (key, value string, ok bool) {
	words := append([]string{c.Command}, c.Args...)
	for _, w := range words {
		base := filepath.Base(strings.SplitN(strings.TrimPrefix(w, "@"), "@", 2)[0])
		base = strings.TrimPrefix(base, "mcp-")
		d, known := dataPathDefaults[base]
		if !known {
			continue
		}
		if _, set := c.Env[d.env]; set {
			return "", "", false
		}
		return d.env, filepath.Join(home, d.file), true
	}
	return "", "", false
}
