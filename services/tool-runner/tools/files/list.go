package files

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/toolschema"

	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// errStop ends a walk early.
var errStop = errors.New("stop walking")

// ListDir is list_dir: a directory's entries, directories marked with a
// trailing "/", optionally recursive.
func ListDir() tools.Tool {
	return tools.Func{
		Def: toolschema.Tool{
			Name:        "list_dir",
			Description: "List a directory of the workspace. Directories end with \"/\", symlinks with \"@\". Set recursive=true to see nested files; .git, node_modules and similar directories are skipped when recursing.",
			Parameters: toolschema.Object(map[string]any{
				"path":        map[string]any{"type": "string", "default": ".", "description": "Directory path, relative to the workspace (default: the workspace)"},
				"recursive":   map[string]any{"type": "boolean", "default": false, "description": "List nested directories too"},
				"max_entries": map[string]any{"type": "integer", "minimum": 1, "maximum": 5000, "default": 200, "description": "Maximum entries to return (default 200)"},
			}),
			ReadOnly: true,
		},
		Fn: listDir,
	}
}

func listDir(ctx context.Context, c *tools.Call) (tools.Result, error) {
	var a struct {
		Path       string `json:"path"`
		Recursive  bool   `json:"recursive"`
		MaxEntries int    `json:"max_entries"`
	}
	if err := toolschema.Decode(c.Args, &a); err != nil {
		return tools.Result{}, err
	}
	rel, err := c.Workspace.Directory(a.Path)
	if err != nil {
		return tools.Result{}, err
	}
	var items []string
	total := 0
	add := func(name string, d fs.DirEntry) {
		total++
		if len(items) >= a.MaxEntries {
			return
		}
		switch {
		case d.IsDir():
			name += "/"
		case d.Type()&fs.ModeSymlink != 0:
			name += "@"
		}
		items = append(items, name)
	}
	if !a.Recursive {
		entries, err := c.Workspace.ReadDir(a.Path)
		if err != nil {
			return tools.Result{}, err
		}
		for _, d := range entries {
			add(d.Name(), d)
		}
	} else {
		root := filepath.ToSlash(rel)
		err := walk(ctx, c.Workspace.FS(), root, func(p string, d fs.DirEntry) error {
			add(relTo(root, p), d)
			return nil
		})
		if err != nil {
			return tools.Result{}, err
		}
	}
	if total == 0 {
		return tools.Result{Text: fmt.Sprintf("Directory %s is empty", displayDir(a.Path))}, nil
	}
	text := strings.Join(items, "\n")
	if total > len(items) {
		text += fmt.Sprintf("\n\n(truncated: showing %d of %d entries; raise max_entries or list a subdirectory)", len(items), total)
	}
	return tools.Result{Text: text}, nil
}

func displayDir(p string) string {
	if p == "" || p == "." {
		return "the workspace"
	}
	return p
}

// relTo returns p relative to root (both slash paths in the workspace FS).
func relTo(root, p string) string {
	if root == "." {
		return p
	}
	return strings.TrimPrefix(p, root+"/")
}

// Glob is glob: files matching a pattern, newest first.
func Glob() tools.Tool {
	return tools.Func{
		Def: toolschema.Tool{
			Name:        "glob",
			Description: "Find files by glob pattern, newest first. \"*\" matches within a path segment, \"**\" across directories, e.g. \"**/*.go\" or \"docs/*.md\"; a pattern without \"/\" matches file names at any depth. .git, node_modules and similar directories are skipped.",
			Parameters: toolschema.Object(map[string]any{
				"pattern":     map[string]any{"type": "string", "minLength": 1, "description": "Glob pattern, e.g. \"**/*.py\""},
				"path":        map[string]any{"type": "string", "default": ".", "description": "Directory to search in, relative to the workspace (default: the workspace)"},
				"max_results": map[string]any{"type": "integer", "minimum": 1, "maximum": 1000, "default": 200, "description": "Maximum paths to return (default 200)"},
			}, "pattern"),
			ReadOnly: true,
		},
		Fn: glob,
	}
}

func glob(ctx context.Context, c *tools.Call) (tools.Result, error) {
	var a struct {
		Pattern    string `json:"pattern"`
		Path       string `json:"path"`
		MaxResults int    `json:"max_results"`
	}
	if err := toolschema.Decode(c.Args, &a); err != nil {
		return tools.Result{}, err
	}
	pattern := strings.TrimPrefix(filepath.ToSlash(strings.TrimSpace(a.Pattern)), "./")
	if _, err := path.Match(strings.ReplaceAll(pattern, "**", "*"), ""); err != nil {
		return tools.Result{}, fmt.Errorf("%w: argument \"pattern\": %v", toolschema.ErrInvalidArguments, err)
	}
	rel, err := c.Workspace.Directory(a.Path)
	if err != nil {
		return tools.Result{}, err
	}
	root := filepath.ToSlash(rel)
	type hit struct {
		path string
		mod  time.Time
	}
	var hits []hit
	err = walk(ctx, c.Workspace.FS(), root, func(p string, d fs.DirEntry) error {
		if d.IsDir() {
			return nil
		}
		r := relTo(root, p)
		if !MatchGlob(pattern, r) {
			return nil
		}
		var mod time.Time
		if fi, err := d.Info(); err == nil {
			mod = fi.ModTime()
		}
		hits = append(hits, hit{p, mod})
		if len(hits) > 100_000 {
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return tools.Result{}, err
	}
	if len(hits) == 0 {
		return tools.Result{Text: fmt.Sprintf("No files match %q in %s", a.Pattern, displayDir(a.Path))}, nil
	}
	slices.SortFunc(hits, func(x, y hit) int {
		return cmp.Or(y.mod.Compare(x.mod), cmp.Compare(x.path, y.path))
	})
	n := min(len(hits), a.MaxResults)
	lines := make([]string, n)
	for i := range lines {
		lines[i] = hits[i].path
	}
	text := strings.Join(lines, "\n")
	if len(hits) > n {
		text += fmt.Sprintf("\n\n(showing the %d newest of %d matches)", n, len(hits))
	}
	return tools.Result{Text: text}, nil
}

// MatchGlob reports whether the slash path p matches pattern: "*", "?"
// and "[...]" within a segment, "**" for any number of segments. A
// pattern without "/" is matched against the last segment only.
func MatchGlob(pattern, p string) bool {
	if !strings.Contains(pattern, "/") && !strings.Contains(pattern, "**") {
		ok, _ := path.Match(pattern, path.Base(p))
		return ok
	}
	var pat []string
	for _, seg := range strings.Split(pattern, "/") {
		if seg == "**" && len(pat) > 0 && pat[len(pat)-1] == "**" {
			continue // "**/**" is "**", and would cost exponential time
		}
		pat = append(pat, seg)
	}
	return matchSegments(pat, strings.Split(p, "/"))
}

func matchSegments(pat, segs []string) bool {
	// failed remembers where a "**" could not lead to a match, so that
	// each is tried once from each segment: without it, "**" apart in
	// the pattern ("**/a/" ten times) took exponential time.
	failed := map[[2]int]bool{}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		for i < len(pat) {
			if pat[i] == "**" {
				if failed[[2]int{i, j}] {
					return false
				}
				for k := j; k <= len(segs); k++ {
					if match(i+1, k) {
						return true
					}
				}
				failed[[2]int{i, j}] = true
				return false
			}
			if j == len(segs) {
				return false
			}
			if ok, _ := path.Match(pat[i], segs[j]); !ok {
				return false
			}
			i, j = i+1, j+1
		}
		return j == len(segs)
	}
	return match(0, 0)
}
