package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// WithReadOnly makes the workspace-relative paths (files or directories
// with everything in them) read-only to the Workspace's writes: writing,
// creating or removing them is refused with [ErrReadOnly]. The runner
// uses it for the agent's profile files (see [ProfilePaths]).
func WithReadOnly(rels ...string) WorkspaceOption {
	return func(w *Workspace) {
		for _, r := range rels {
			w.readOnly = append(w.readOnly, filepath.Clean(r))
		}
	}
}

// ReadOnly lists the paths given to [WithReadOnly].
func (w *Workspace) ReadOnly() []string { return w.readOnly }

// checkWritable refuses a write to p (rel in the workspace) that would
// change a read-only path, also when p reaches it through a symlink
// inside the workspace.
func (w *Workspace) checkWritable(p, rel string) error {
	if len(w.readOnly) == 0 {
		return nil
	}
	return w.refuseReadOnly(p, rel, w.resolve(rel))
}

// refuseReadOnly refuses a write to p when one of cands (paths relative
// to the workspace) is a read-only path or lies beneath one.
func (w *Workspace) refuseReadOnly(p string, cands ...string) error {
	for _, cand := range cands {
		for _, ro := range w.readOnly {
			if Within(cand, ro) {
				return denied(p, ErrReadOnly, fmt.Sprintf("%s is part of the agent's profile, which shapes every session's prompt; sessions may not change it (the operator can allow it with tools.workspace.editableProfile)", ro))
			}
		}
	}
	return nil
}

// checkIn refuses a change to name in the opened directory dir when that
// is a read-only path. It judges the directory the kernel opened, not
// the path that led to it: a symlink swapped after [Workspace.checkWritable]
// (a command running beside the file tool) cannot carry the change into
// the profile.
func (w *Workspace) checkIn(p string, dir *os.Root, name string) error {
	if len(w.readOnly) == 0 {
		return nil
	}
	f, err := dir.Open(".")
	if err != nil {
		return fmt.Errorf("open the directory of %s: %w", p, err)
	}
	defer f.Close()
	canon, err := w.canonical(p, f)
	if err != nil {
		return err
	}
	return w.refuseReadOnly(p, filepath.Join(canon, name))
}

// canonical is where the open file f lies in the workspace now, as the
// kernel names it (/proc/self/fd), every symlink resolved.
func (w *Workspace) canonical(p string, f *os.File) (string, error) {
	host, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return "", fmt.Errorf("locate %s: %w", p, err)
	}
	rel, err := filepath.Rel(w.dir, host)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", denied(p, ErrOutsideWorkspace, "it resolves to outside the workspace")
	}
	return rel, nil
}

// ReadOnlyBinds opens the read-only paths that exist as real files or
// directories, for exec to bind read-only over the workspace. A symlink
// or special file in such a place is skipped: it is not bound, and
// nothing trusted reads it. The caller closes the files.
func (w *Workspace) ReadOnlyBinds() []Bind {
	var binds []Bind
	for _, ro := range w.readOnly {
		f, err := w.root.OpenFile(ro, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		fi, err := f.Stat()
		if err != nil || !(fi.IsDir() || fi.Mode().IsRegular()) {
			f.Close()
			continue
		}
		binds = append(binds, Bind{File: f, Dest: filepath.Join(w.dir, ro)})
	}
	return binds
}
