package files

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/nanofleet/nanofleet/pkg/textcut"
	"github.com/nanofleet/nanofleet/pkg/toolschema"

	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// Grep output modes.
const (
	ModeContent = "content"
	ModeFiles   = "files_with_matches"
	ModeCount   = "count"
)

// maxGrepLineChars clips a matching line in content mode.
const maxGrepLineChars = 500

type grepArgs struct {
	Pattern         string `json:"pattern"`
	Path            string `json:"path"`
	Glob            string `json:"glob"`
	OutputMode      string `json:"output_mode"`
	CaseInsensitive bool   `json:"case_insensitive"`
	FixedStrings    bool   `json:"fixed_strings"`
	Context         int    `json:"context"`
	HeadLimit       int    `json:"head_limit"`
}

// Grep is grep: search file contents with a regular expression (RE2
// syntax), skipping .git, node_modules and similar directories, binary
// files and files over [MaxGrepFileBytes].
func Grep() tools.Tool {
	return tools.Func{
		Def: toolschema.Tool{
			Name:        "grep",
			Description: "Search file contents in the workspace with a regular expression (RE2 syntax). output_mode \"content\" shows matching lines as path:line: text, \"files_with_matches\" only the paths, \"count\" the number of matching lines per file. Skips .git, node_modules, binary files and files over 4 MB.",
			Parameters: toolschema.Object(map[string]any{
				"pattern":          map[string]any{"type": "string", "minLength": 1, "description": "Regular expression (or plain text with fixed_strings=true)"},
				"path":             map[string]any{"type": "string", "default": ".", "description": "File or directory to search, relative to the workspace (default: the workspace)"},
				"glob":             map[string]any{"type": "string", "description": "Only search files matching this glob, e.g. \"*.go\" or \"src/**/*.ts\""},
				"output_mode":      map[string]any{"type": "string", "enum": []string{ModeContent, ModeFiles, ModeCount}, "default": ModeContent, "description": "content (default), files_with_matches or count"},
				"case_insensitive": map[string]any{"type": "boolean", "default": false, "description": "Ignore case"},
				"fixed_strings":    map[string]any{"type": "boolean", "default": false, "description": "Treat pattern as plain text"},
				"context":          map[string]any{"type": "integer", "minimum": 0, "maximum": 10, "default": 0, "description": "Lines of context around each match in content mode"},
				"head_limit":       map[string]any{"type": "integer", "minimum": 1, "maximum": 1000, "default": 250, "description": "Maximum results (lines in content mode, files otherwise; default 250)"},
			}, "pattern"),
			ReadOnly: true,
		},
		Fn: grep,
	}
}

func grep(ctx context.Context, c *tools.Call) (tools.Result, error) {
	var a grepArgs
	if err := toolschema.Decode(c.Args, &a); err != nil {
		return tools.Result{}, err
	}
	expr := a.Pattern
	if a.FixedStrings {
		expr = regexp.QuoteMeta(expr)
	}
	if a.CaseInsensitive {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return tools.Result{}, fmt.Errorf("%w: argument \"pattern\": not a valid regular expression: %v", toolschema.ErrInvalidArguments, err)
	}
	rel, fi, err := c.Workspace.Stat(a.Path)
	if err != nil {
		return tools.Result{}, err
	}
	globPat := strings.TrimPrefix(filepath.ToSlash(a.Glob), "./")
	var out []string
	results, files, truncated := 0, 0, false
	search := func(p string) error {
		if globPat != "" && !MatchGlob(globPat, p) {
			return nil
		}
		lines, n, err := grepFile(c, p, re, a)
		if err != nil || n == 0 {
			return nil // unreadable, binary, special or too large: skipped
		}
		files++
		switch a.OutputMode {
		case ModeFiles:
			out = append(out, p)
			results++
		case ModeCount:
			out = append(out, fmt.Sprintf("%s: %d", p, n))
			results++
		default:
			for _, l := range lines {
				if results >= a.HeadLimit {
					truncated = true
					return errStop
				}
				out = append(out, l)
				results++
			}
		}
		if results >= a.HeadLimit {
			truncated = true
			return errStop
		}
		return nil
	}
	root := filepath.ToSlash(rel)
	if fi.IsDir() {
		err = walk(ctx, c.Workspace.FS(), root, func(p string, d fs.DirEntry) error {
			if !d.Type().IsRegular() {
				return nil
			}
			return search(p)
		})
	} else {
		err = search(root)
	}
	if err != nil && !errors.Is(err, errStop) {
		return tools.Result{}, err
	}
	if files == 0 {
		return tools.Result{Text: fmt.Sprintf("No matches for %q in %s", a.Pattern, displayDir(a.Path))}, nil
	}
	text := strings.Join(out, "\n")
	if truncated {
		text += fmt.Sprintf("\n\n(results cut at head_limit=%d; narrow the pattern, path or glob)", a.HeadLimit)
	}
	return tools.Result{Text: text}, nil
}

// grepFile returns the content-mode lines of one file and its number of
// matching lines. Binary, oversize and refused files yield an error.
func grepFile(c *tools.Call, p string, re *regexp.Regexp, a grepArgs) ([]string, int, error) {
	f, fi, err := c.Workspace.Open(p)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if fi.Size() > MaxGrepFileBytes {
		return nil, 0, errors.New("too large")
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if sniff, _ := br.Peek(8192); looksBinary(sniff) {
		return nil, 0, ErrBinary
	}
	// The size above is the file's at open: one that grows meanwhile is
	// read no further than the limit.
	data, err := io.ReadAll(io.LimitReader(br, MaxGrepFileBytes+1))
	if err != nil {
		return nil, 0, err
	}
	if len(data) > MaxGrepFileBytes {
		return nil, 0, errors.New("too large")
	}
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	var out []string
	count, shownUpTo := 0, -1
	for i, line := range lines {
		if !re.MatchString(line) {
			continue
		}
		count++
		if a.OutputMode != ModeContent && a.OutputMode != "" {
			continue
		}
		from, to := max(0, i-a.Context), min(len(lines)-1, i+a.Context)
		if a.Context > 0 && shownUpTo >= 0 && from > shownUpTo+1 {
			out = append(out, "--")
		}
		for j := max(from, shownUpTo+1); j <= to; j++ {
			sep := "-"
			if j == i || (a.Context > 0 && re.MatchString(lines[j])) {
				sep = ":"
			}
			out = append(out, fmt.Sprintf("%s:%d%s %s", p, j+1, sep, clip(lines[j])))
		}
		shownUpTo = to
	}
	return out, count, nil
}

func clip(s string) string {
	if cut := textcut.Prefix(s, maxGrepLineChars); len(cut) < len(s) {
		return cut + " …"
	}
	return s
}
