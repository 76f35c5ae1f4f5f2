// Package patch provides apply_patch, which edits several files in one
// call from a patch in the "*** Begin Patch" format (the format OpenAI's
// Codex models are trained to write):
//
//	*** Begin Patch
//	*** Add File: docs/new.md
//	+first line
//	+second line
//	*** Delete File: old.txt
//	*** Update File: src/app.py
//	*** Move to: src/main.py
//	@@ def greet():
//	-    print("hi")
//	+    print("hello")
//	*** End Patch
//
// An Update File section holds chunks. Each chunk may start with "@@",
// optionally followed by a line to find first (an anchor, e.g. the
// enclosing function's signature); its lines start with " " (context),
// "-" (removed) or "+" (added). The context and removed lines must appear
// in the file in that order after the previous chunk; they are matched
// exactly, then ignoring trailing whitespace, then ignoring leading and
// trailing whitespace. "*** End of File" after a chunk pins it to the end
// of the file. "*** Move to:" renames the file.
//
// The patch is applied all or nothing: every section is checked against
// the workspace before anything is written, and files already written are
// restored if a later write fails. Line endings (LF or CRLF) are kept.
package patch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"unicode/utf8"

	"github.com/nanofleet/nanofleet/pkg/toolschema"

	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// maxFileBytes caps a file apply_patch rewrites.
const maxFileBytes = 16 << 20

// Tool is apply_patch.
func Tool() tools.Tool {
	return tools.Func{
		Def: toolschema.Tool{
			Name: "apply_patch",
			Description: "Edit, add, delete or rename several workspace files in one call. The patch uses this format:\n" +
				"*** Begin Patch\n*** Add File: path\n+line\n*** Delete File: path\n*** Update File: path\n*** Move to: new/path (optional)\n@@ optional line to find first\n context line\n-removed line\n+added line\n*** End Patch\n" +
				"Context and removed lines must match the file. Applied all or nothing.",
			Parameters: toolschema.Object(map[string]any{
				"patch":   map[string]any{"type": "string", "minLength": 1, "description": "The patch, from \"*** Begin Patch\" to \"*** End Patch\""},
				"dry_run": map[string]any{"type": "boolean", "default": false, "description": "Check the patch and report what it would do without writing"},
			}, "patch"),
			Exclusive: true,
		},
		Fn: apply,
	}
}

const (
	opAdd opKind = iota
	opDelete
	opUpdate
)

// write is one planned change of the workspace.
type write struct {
	path    string
	data    []byte // nil: delete
	summary string
}

func apply(ctx context.Context, c *tools.Call) (tools.Result, error) {
	var a struct {
		Patch  string `json:"patch"`
		DryRun bool   `json:"dry_run"`
	}
	if err := toolschema.Decode(c.Args, &a); err != nil {
		return tools.Result{}, err
	}
	sections, err := Parse(a.Patch)
	if err != nil {
		return tools.Result{}, err
	}
	ws := c.Workspace
	pending := map[string][]byte{} // rel path -> planned content (nil: deleted)
	var plan []write
	read := func(p string) (string, bool, error) {
		rel, err := ws.Rel(p)
		if err != nil {
			return "", false, err
		}
		if data, ok := pending[rel]; ok {
			if data == nil {
				return "", false, &sandbox.PathError{Path: p, Reason: "was deleted earlier in this patch", Err: fs.ErrNotExist}
			}
			return string(data), true, nil
		}
		data, err := ws.ReadFile(p, maxFileBytes)
		if err != nil {
			return "", false, err
		}
		if !utf8.Valid(data) {
			return "", false, fmt.Errorf("%w: %s is not UTF-8 text", ErrBadPatch, p)
		}
		return string(data), true, nil
	}
	plan1 := func(p string, data []byte, summary string) error {
		rel, err := ws.Rel(p)
		if err != nil {
			return err
		}
		pending[rel] = data
		plan = append(plan, write{path: p, data: data, summary: summary})
		return nil
	}
	for _, s := range sections {
		switch s.kind {
		case opAdd:
			if _, _, err := ws.Stat(s.path); err == nil {
				if data, ok := pending[mustRel(ws, s.path)]; !ok || data != nil {
					return tools.Result{}, fmt.Errorf("%w: cannot add %s: it already exists (use *** Update File)", ErrBadPatch, s.path)
				}
			} else if !errors.Is(err, fs.ErrNotExist) {
				return tools.Result{}, err
			}
			content := strings.Join(s.content, "\n")
			if len(s.content) > 0 {
				content += "\n"
			}
			if err := plan1(s.path, []byte(content), fmt.Sprintf("- add %s (+%d)", s.path, len(s.content))); err != nil {
				return tools.Result{}, err
			}
		case opDelete:
			if _, _, err := read(s.path); err != nil {
				return tools.Result{}, err
			}
			if err := plan1(s.path, nil, "- delete "+s.path); err != nil {
				return tools.Result{}, err
			}
		case opUpdate:
			old, _, err := read(s.path)
			if err != nil {
				return tools.Result{}, err
			}
			updated, added, removed, err := applyChunks(s.path, old, s.chunks)
			if err != nil {
				return tools.Result{}, err
			}
			target, summary := s.path, fmt.Sprintf("- update %s (+%d/-%d)", s.path, added, removed)
			if s.moveTo != "" {
				target = s.moveTo
				summary = fmt.Sprintf("- move %s -> %s (+%d/-%d)", s.path, s.moveTo, added, removed)
				if err := plan1(s.path, nil, ""); err != nil {
					return tools.Result{}, err
				}
			}
			if err := plan1(target, []byte(updated), summary); err != nil {
				return tools.Result{}, err
			}
		}
	}
	var summary []string
	for _, w := range plan {
		if w.summary != "" {
			summary = append(summary, w.summary)
		}
	}
	if a.DryRun {
		return tools.Result{Text: "Patch checks out (dry run, nothing written):\n" + strings.Join(summary, "\n")}, nil
	}
	if err := commit(ctx, ws, plan); err != nil {
		return tools.Result{}, err
	}
	return tools.Result{Text: "Patch applied:\n" + strings.Join(summary, "\n")}, nil
}

func mustRel(ws *sandbox.Workspace, p string) string {
	rel, _ := ws.Rel(p)
	return rel
}

// commit performs the planned writes; if one fails, the files already
// changed are put back as they were.
func commit(ctx context.Context, ws *sandbox.Workspace, plan []write) error {
	type backup struct {
		path string
		data []byte // nil: did not exist
	}
	var done []backup
	rollback := func() {
		for i := len(done) - 1; i >= 0; i-- {
			b := done[i]
			if b.data == nil {
				ws.Remove(b.path)
			} else {
				ws.WriteFile(b.path, b.data)
			}
		}
	}
	for _, w := range plan {
		if err := ctx.Err(); err != nil {
			rollback()
			return err
		}
		prev, err := ws.ReadFile(w.path, maxFileBytes)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			rollback()
			return err
		}
		if w.data == nil {
			err = ws.Remove(w.path)
		} else {
			err = ws.WriteFile(w.path, w.data)
		}
		if err != nil {
			rollback()
			return fmt.Errorf("apply_patch: %w (no file was changed)", err)
		}
		done = append(done, backup{w.path, prev})
	}
	return nil
}
