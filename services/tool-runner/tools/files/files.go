// Package files provides the workspace file tools with nanobot's names
// and parameters: read_file, write_file, edit_file, list_dir, glob and
// grep. Every path goes through the call's [sandbox.Workspace], so none of
// them can reach outside the workspace, read a device or FIFO, or follow
// a hard link out.
package files

import (
	"context"
	"io/fs"

	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// Limits shared by the file tools.
const (
	// MaxReadChars caps the text read_file returns in one call.
	MaxReadChars = 128_000
	// DefaultReadLines is read_file's default limit.
	DefaultReadLines = 2000
	// MaxLineChars caps one line of read_file output (minified files).
	MaxLineChars = 4000
	// MaxImageBytes caps an image read_file attaches.
	MaxImageBytes = 20 << 20
	// MaxEditBytes caps a file edit_file rewrites.
	MaxEditBytes = 16 << 20
	// MaxGrepFileBytes: larger files are skipped by grep.
	MaxGrepFileBytes = 4 << 20
)

// ignoredDirs are skipped by list_dir (recursive), glob and grep.
var ignoredDirs = map[string]bool{
	".git": true, "node_modules": true, "__pycache__": true, ".venv": true, "venv": true,
	".tox": true, ".mypy_cache": true, ".pytest_cache": true, ".ruff_cache": true, ".hg": true, ".svn": true,
}

// walk visits what lies below root in fsys, directories included,
// skipping ignoredDirs and entries it cannot read; it stops when ctx
// ends or visit returns an error (fs.SkipDir skips a directory).
func walk(ctx context.Context, fsys fs.FS, root string, visit func(p string, d fs.DirEntry) error) error {
	return fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable entry: skip it
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if p == root {
			return nil
		}
		if d.IsDir() && ignoredDirs[d.Name()] {
			return fs.SkipDir
		}
		return visit(p, d)
	})
}

// All returns the file tools.
func All() []tools.Tool {
	return []tools.Tool{ReadFile(), WriteFile(), EditFile(), ListDir(), Glob(), Grep()}
}
