package files

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nanofleet/nanofleet/pkg/toolschema"

	"github.com/nanofleet/nanofleet/services/tool-runner/quota"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/linematch"
)

// WriteFile is write_file: replace a file's content, creating parent
// directories. The write is atomic (temp file + rename).
func WriteFile() tools.Tool {
	return tools.Func{
		Def: toolschema.Tool{
			Name:        "write_file",
			Description: "Write content to a file in the workspace, replacing it if it exists. Creates parent directories if needed.",
			Parameters: toolschema.Object(map[string]any{
				"path":    map[string]any{"type": "string", "minLength": 1, "description": "File path, relative to the workspace"},
				"content": map[string]any{"type": "string", "description": "The complete new content of the file"},
			}, "path", "content"),
			Exclusive: true,
		},
		Fn: func(ctx context.Context, c *tools.Call) (tools.Result, error) {
			var a struct {
				Path    string `json:"path"`
				Content string `json:"content"`
			}
			if err := toolschema.Decode(c.Args, &a); err != nil {
				return tools.Result{}, err
			}
			if err := c.Workspace.WriteFile(a.Path, []byte(a.Content)); err != nil {
				return tools.Result{}, err
			}
			return tools.Result{Text: fmt.Sprintf("Wrote %d bytes to %s", len(a.Content), a.Path)}, nil
		},
	}
}

type editArgs struct {
	Path        string `json:"path"`
	OldText     string `json:"old_text"`
	NewText     string `json:"new_text"`
	ReplaceAll  bool   `json:"replace_all"`
	Expected    int    `json:"expected_replacements"`
	HasExpected bool   `json:"-"`
}

// EditFile is edit_file: replace exact text. old_text must occur once,
// unless replace_all is set or expected_replacements gives the count. When
// the exact text is not found, a match that differs only in leading and
// trailing whitespace of each line is accepted if it is unique. Line
// endings (LF or CRLF) are kept as the file has them.
func EditFile() tools.Tool {
	return tools.Func{
		Def: toolschema.Tool{
			Name:        "edit_file",
			Description: "Edit a file by replacing old_text with new_text. old_text must match the file exactly (copy it from read_file without the line numbers) and be unique, unless replace_all is true; expected_replacements checks how many occurrences there are.",
			Parameters: toolschema.Object(map[string]any{
				"path":                  map[string]any{"type": "string", "minLength": 1, "description": "File path, relative to the workspace"},
				"old_text":              map[string]any{"type": "string", "minLength": 1, "description": "The exact text to find"},
				"new_text":              map[string]any{"type": "string", "description": "The text to put in its place"},
				"replace_all":           map[string]any{"type": "boolean", "default": false, "description": "Replace every occurrence (default false: old_text must be unique)"},
				"expected_replacements": map[string]any{"type": "integer", "minimum": 1, "description": "How many occurrences there must be; the edit fails otherwise"},
			}, "path", "old_text", "new_text"),
			Exclusive: true,
		},
		Fn: editFile,
	}
}

func editFile(ctx context.Context, c *tools.Call) (tools.Result, error) {
	var a editArgs
	if err := toolschema.Decode(c.Args, &a); err != nil {
		return tools.Result{}, err
	}
	_, a.HasExpected = c.Args["expected_replacements"]
	data, err := c.Workspace.ReadFile(a.Path, MaxEditBytes)
	if err != nil {
		return tools.Result{}, err
	}
	if !utf8.Valid(data) {
		return tools.Result{}, fmt.Errorf("%w: %q is not UTF-8 text", ErrBinary, a.Path)
	}
	content := string(data)
	crlf := strings.Contains(content, "\r\n")
	content = strings.ReplaceAll(content, "\r\n", "\n")
	old := strings.ReplaceAll(a.OldText, "\r\n", "\n")
	repl := strings.ReplaceAll(a.NewText, "\r\n", "\n")

	match, count := old, strings.Count(content, old)
	fuzzy := false
	if count == 0 {
		if m, n := trimmedLineMatch(content, old); n > 0 {
			match, count, fuzzy = m, n, true
		}
	}
	switch {
	case fuzzy && count > 1:
		return tools.Result{}, fmt.Errorf("%w: old_text is not in %s exactly, and %d places match it when whitespace is ignored; copy the exact text", ErrAmbiguous, a.Path, count)
	case count == 0:
		return tools.Result{}, fmt.Errorf("%w in %s; read the file again and copy the text exactly, whitespace included", ErrNoMatch, a.Path)
	case a.HasExpected && count != a.Expected:
		return tools.Result{}, fmt.Errorf("%w: old_text appears %d times in %s, expected_replacements is %d", ErrAmbiguous, count, a.Path, a.Expected)
	case count > 1 && !a.ReplaceAll && !a.HasExpected:
		return tools.Result{}, fmt.Errorf("%w: old_text appears %d times in %s; include more surrounding lines to make it unique, or set replace_all=true", ErrAmbiguous, count, a.Path)
	}
	n, replaced := 1, 1
	if a.ReplaceAll || a.HasExpected {
		n, replaced = -1, count
	}
	// The result is bounded as the file read is: replacing every one of
	// a large file's characters by a long text would build a string of
	// gigabytes in the runner's memory before anything is written.
	if size := len(content) + replaced*(len(repl)-len(match)); size > MaxEditBytes {
		return tools.Result{}, fmt.Errorf("%w: the edit would make %s %d bytes, more than the %d bytes edit_file writes; edit fewer places at once or use write_file", toolschema.ErrInvalidArguments, a.Path, size, MaxEditBytes)
	}
	// The runner reserved the call's arguments against the quota, and
	// replace_all multiplies the new text: a hundred thousand replaced
	// places grew a workspace far past its quota in one call.
	if grow := int64(replaced) * int64(len(repl)-len(match)); grow > 0 && c.FileSizeLimit != 0 && grow > c.FileSizeLimit {
		return tools.Result{}, fmt.Errorf("%w: the edit would add %s to %s, and the workspace has %s left; edit fewer places at once, or delete what is no longer needed first",
			quota.ErrExceeded, quota.Bytes(grow), a.Path, quota.Bytes(max(c.FileSizeLimit, 0)))
	}
	updated := strings.Replace(content, match, repl, n)
	if crlf {
		updated = strings.ReplaceAll(updated, "\n", "\r\n")
	}
	if err := c.Workspace.WriteFile(a.Path, []byte(updated)); err != nil {
		return tools.Result{}, err
	}
	msg := fmt.Sprintf("Edited %s: replaced %d occurrence(s)", a.Path, replaced)
	if fuzzy {
		msg += " (matched ignoring leading/trailing whitespace on each line)"
	}
	return tools.Result{Text: msg}, nil
}

// trimmedLineMatch finds windows of lines equal to old's lines after
// trimming whitespace; it returns the first window's text and how many
// there are.
func trimmedLineMatch(content, old string) (string, int) {
	oldLines := strings.Split(strings.TrimSuffix(old, "\n"), "\n")
	for i := range oldLines {
		oldLines[i] = strings.TrimSpace(oldLines[i])
	}
	if len(oldLines) == 0 || (len(oldLines) == 1 && oldLines[0] == "") {
		return "", 0
	}
	lines := strings.Split(content, "\n")
	trimmed := make([]string, len(lines))
	for i, l := range lines {
		trimmed[i] = strings.TrimSpace(l)
	}
	first, count := linematch.Count(trimmed, oldLines)
	if count == 0 {
		return "", 0
	}
	return strings.Join(lines[first:first+len(oldLines)], "\n"), count
}
