// Package onboard writes a new user's config file and workspace from
// templates, the way `nanobot onboard` does, never overwriting a file the
// user already has unless asked to.
package onboard

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nanofleet/nanofleet/pkg/wsfile"
)

//go:embed templates
var templates embed.FS

// DefaultWorkspace is the workspace [ConfigTemplate] names.
const DefaultWorkspace = "~/.nanofleet/workspace"

// ConfigTemplate is the config file written by onboard, for the default
// workspace ([Config] names another).
const ConfigTemplate = `{
  "agents": {
    "defaults": {
      "workspace": "` + DefaultWorkspace + `",
      "model": "gpt-4o-mini",
      "maxTokens": 8192,
      "temperature": 0.1,
      "maxToolIterations": 40,
      "contextWindowTokens": 200000,
      "timezone": "UTC"
    }
  },
  "providers": {
    "openai": { "apiKey": "${OPENAI_API_KEY:-}", "apiBase": "${OPENAI_BASE_URL:-}" }
  },
  "nats": { "prefix": "nanofleet", "host": "127.0.0.1", "port": 4222 },
  "tools": { "exec": { "timeout": 60, "sandbox": "bwrap" } }
}
`

// Config is [ConfigTemplate] naming workspace, as the config file says
// it: a path under the home directory starts with "~/", which loading
// expands, and one elsewhere is absolute.
func Config(workspace string) (string, error) {
	abs, err := filepath.Abs(workspace)
	if err != nil {
		return "", fmt.Errorf("onboard: workspace: %w", err)
	}
	name := abs
	if home, err := os.UserHomeDir(); err == nil {
		if rel, err := filepath.Rel(home, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			name = filepath.ToSlash(filepath.Join("~", rel))
		}
	}
	quoted, err := json.Marshal(name)
	if err != nil {
		return "", fmt.Errorf("onboard: workspace: %w", err)
	}
	return strings.Replace(ConfigTemplate, `"`+DefaultWorkspace+`"`, string(quoted), 1), nil
}

// Result lists what onboard wrote and what it kept.
type Result struct {
	Wrote, Kept []string
}

// Option adjusts what Write creates.
type Option func(*writer)

type writer struct {
	owner *[2]int
}

// WithOwner gives the workspace directory to uid and gid before its files
// are written, so that they and the directories under it (memory/ above
// all) are theirs: the user exec runs as when the fleet runs as root,
// which must be able to edit them. The tool-runner gives that user the
// workspace directory as well.
func WithOwner(uid, gid int) Option {
	return func(w *writer) { w.owner = &[2]int{uid, gid} }
}

// Write creates configPath, naming the workspace, and the workspace.
// Existing files are kept unless force is set.
func Write(configPath, workspace string, force bool, opts ...Option) (Result, error) {
	var w writer
	for _, o := range opts {
		o(&w)
	}
	var res Result
	cfg, err := Config(workspace)
	if err != nil {
		return res, err
	}
	put := func(path string, data []byte, mode os.FileMode) error {
		if _, err := os.Stat(path); err == nil && !force {
			res.Kept = append(res.Kept, path)
			return nil
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, mode); err != nil {
			return err
		}
		res.Wrote = append(res.Wrote, path)
		return nil
	}
	// The config holds API keys: its owner's alone.
	if err := put(configPath, []byte(cfg), 0o600); err != nil {
		return res, fmt.Errorf("onboard: config: %w", err)
	}
	// Sessions may have written the workspace: its files are written
	// without following a symlink in any component (a planted link is
	// replaced, never written through).
	if err := os.MkdirAll(workspace, 0o755); err != nil {
		return res, fmt.Errorf("onboard: workspace: %w", err)
	}
	if w.owner != nil {
		// What wsfile creates takes the owner of its directory.
		if err := os.Chown(workspace, w.owner[0], w.owner[1]); err != nil {
			return res, fmt.Errorf("onboard: workspace owner: %w", err)
		}
	}
	dir, err := wsfile.Open(workspace)
	if err != nil {
		return res, fmt.Errorf("onboard: workspace: %w", err)
	}
	defer dir.Close()
	err = fs.WalkDir(templates, "templates", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := templates.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("templates", p)
		path := filepath.Join(workspace, rel)
		if _, err := dir.Lstat(rel); err == nil && !force {
			res.Kept = append(res.Kept, path)
			return nil
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := dir.WriteFile(rel, data, wsfile.WriteOptions{}); err != nil {
			return err
		}
		res.Wrote = append(res.Wrote, path)
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("onboard: workspace: %w", err)
	}
	return res, nil
}
