package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/nanofleet/nanofleet/pkg/wsfile"
)

// Workspace is a directory that file tools may use and nothing beyond it.
// It is safe for concurrent use; Close it when done.
type Workspace struct {
	dir      string // absolute, symlinks resolved
	given    string // absolute, as configured
	root     *os.Root
	owner    *owner
	readOnly []string // relative paths file tools may not change
}

type owner struct{ uid, gid int }

// WorkspaceOption changes how a workspace is opened.
type WorkspaceOption func(*Workspace)

// WithOwner gives the workspace directory and everything the Workspace
// creates in it to uid:gid, the ids sandboxed commands run as (see
// [Executor.Owner]), so that they can change what file tools wrote.
func WithOwner(uid, gid int) WorkspaceOption {
	return func(w *Workspace) { w.owner = &owner{uid, gid} }
}

// OpenWorkspace creates dir (and its parents) if needed and opens it.
func OpenWorkspace(dir string, opts ...WorkspaceOption) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", abs, err)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	w := &Workspace{dir: real, given: abs, root: root}
	for _, o := range opts {
		o(w)
	}
	if err := w.chown("."); err != nil {
		root.Close()
		return nil, fmt.Errorf("workspace owner: %w", err)
	}
	return w, nil
}

// chown gives rel to the workspace's owner, if it has one.
func (w *Workspace) chown(rel string) error {
	if w.owner == nil {
		return nil
	}
	return w.root.Lchown(rel, w.owner.uid, w.owner.gid)
}

// MkdirAll creates the directory p and its missing parents.
func (w *Workspace) MkdirAll(p string) (string, error) {
	rel, err := w.Rel(p)
	if err != nil {
		return "", err
	}
	if err := w.checkWritable(p, rel); err != nil {
		return "", err
	}
	if err := w.mkdirAll(p, rel); err != nil {
		return "", w.classify(p, rel, err)
	}
	return rel, nil
}

// mkdirAll creates rel and its missing parents one by one, each in its
// parent opened beforehand and checked by [Workspace.checkIn], and gives
// every directory on the way (all inside the workspace) to the owner.
func (w *Workspace) mkdirAll(p, rel string) error {
	if rel == "." {
		return nil
	}
	parts := strings.Split(rel, string(filepath.Separator))
	for i, name := range parts {
		parent, err := wsfile.OpenDir(w.root, filepath.Join(append([]string{"."}, parts[:i]...)...))
		if err != nil {
			return err
		}
		err = w.checkIn(p, parent, name)
		if err == nil {
			if err = parent.Mkdir(name, 0o755); errors.Is(err, fs.ErrExist) {
				err = nil
			}
		}
		if err == nil && w.owner != nil {
			err = parent.Lchown(name, w.owner.uid, w.owner.gid)
		}
		parent.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Close releases the workspace's directory handle.
func (w *Workspace) Close() error { return w.root.Close() }

// Dir is the workspace's absolute path on the host, symlinks resolved.
func (w *Workspace) Dir() string { return w.dir }

// Root is the os.Root beneath which every access happens.
func (w *Workspace) Root() *os.Root { return w.root }

// FS is the workspace as a read-only file system, which refuses a FIFO
// or device rather than wait on it (see [wsfile.FS]).
func (w *Workspace) FS() fs.FS { return wsfile.FS(w.root) }

// Rel turns a path as a model writes it into a path relative to the
// workspace ("." for the workspace itself). Relative paths are taken from
// the workspace; an absolute path is accepted only if it lies inside it.
// "~", ".." leading out, NUL bytes and other absolute paths are refused.
func (w *Workspace) Rel(p string) (string, error) {
	switch {
	case strings.ContainsRune(p, 0):
		return "", denied(p, ErrDenied, "the path contains a NUL byte")
	case p == "":
		return ".", nil
	case strings.HasPrefix(p, "~"):
		return "", denied(p, ErrOutsideWorkspace, `"~" is not expanded here: paths are relative to the workspace (write "notes.md", not "~/notes.md")`)
	}
	c := filepath.Clean(p)
	if filepath.IsAbs(c) {
		for _, base := range []string{w.dir, w.given} {
			if c == base {
				return ".", nil
			}
			if rest, ok := strings.CutPrefix(c, base+string(filepath.Separator)); ok {
				return rest, nil
			}
		}
		return "", denied(p, ErrOutsideWorkspace, "it is an absolute path outside the workspace; use a path relative to the workspace")
	}
	if c == ".." || strings.HasPrefix(c, ".."+string(filepath.Separator)) {
		return "", denied(p, ErrOutsideWorkspace, `".." leads outside the workspace`)
	}
	return c, nil
}

// HostPath is the host path of a path relative to the workspace.
func (w *Workspace) HostPath(rel string) string { return filepath.Join(w.dir, rel) }

// Stat describes the file at p, following symlinks that stay inside.
func (w *Workspace) Stat(p string) (string, fs.FileInfo, error) {
	rel, err := w.Rel(p)
	if err != nil {
		return "", nil, err
	}
	fi, err := w.root.Stat(rel)
	if err != nil {
		return "", nil, w.classify(p, rel, err)
	}
	return rel, fi, nil
}

// Directory checks that p is a directory in the workspace and returns its
// path relative to the workspace.
func (w *Workspace) Directory(p string) (string, error) {
	rel, fi, err := w.Stat(p)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", &PathError{Path: p, Reason: "is not a directory", Err: ErrNotDirectory}
	}
	return rel, nil
}

// Open opens the regular file at p for reading. Directories, devices,
// FIFOs, sockets and files with several hard links are refused. The
// caller closes the file.
func (w *Workspace) Open(p string) (*os.File, fs.FileInfo, error) {
	rel, err := w.Rel(p)
	if err != nil {
		return nil, nil, err
	}
	// O_NONBLOCK: opening a FIFO must not wait for a writer; the type
	// check below refuses it.
	f, err := w.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, w.classify(p, rel, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", p, err)
	}
	if err := checkRegular(p, fi); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// ReadFile reads the regular file at p, refusing files larger than max
// bytes (0: no limit).
func (w *Workspace) ReadFile(p string, max int64) ([]byte, error) {
	f, fi, err := w.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if max > 0 && fi.Size() > max {
		return nil, fmt.Errorf("%q is %d bytes, larger than the %d bytes this tool reads", p, fi.Size(), max)
	}
	r := io.Reader(f)
	if max > 0 {
		r = io.LimitReader(f, max+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if max > 0 && int64(len(data)) > max {
		return nil, fmt.Errorf("%q grew beyond the %d bytes this tool reads", p, max)
	}
	return data, nil
}

// WriteFile replaces the file at p with data, creating parent
// directories. The new content is written to a temporary file beside the
// target and renamed over it, so readers (and other runners sharing the
// workspace) see the old or the new file, never a torn one, and a hard
// link at p is replaced rather than written through.
func (w *Workspace) WriteFile(p string, data []byte) error {
	rel, err := w.Rel(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return &PathError{Path: p, Reason: "is the workspace directory itself", Err: ErrIsDirectory}
	}
	if err := w.checkWritable(p, rel); err != nil {
		return err
	}
	dir, base := filepath.Dir(rel), filepath.Base(rel)
	if err := w.mkdirAll(p, dir); err != nil {
		return w.classify(p, dir, err)
	}
	// Everything below happens in this one directory, the one checked.
	parent, err := wsfile.OpenDir(w.root, dir)
	if err != nil {
		return w.classify(p, rel, err)
	}
	defer parent.Close()
	if err := w.checkIn(p, parent, base); err != nil {
		return err
	}
	perm := fs.FileMode(0o644)
	if fi, err := parent.Lstat(base); err == nil {
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return w.writeThrough(p, rel, data)
		case fi.IsDir():
			return &PathError{Path: p, Reason: "is a directory", Err: ErrIsDirectory}
		case !fi.Mode().IsRegular():
			return denied(p, ErrSpecialFile, fmt.Sprintf("it is a %s, not a regular file", describeMode(fi.Mode())))
		}
		perm = fi.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return w.classify(p, rel, err)
	}
	tmp := ".nanofleet-" + randomHex() + ".tmp"
	f, err := parent.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return w.classify(p, rel, err)
	}
	_, werr := f.Write(data)
	var oerr error
	if w.owner != nil {
		oerr = f.Chown(w.owner.uid, w.owner.gid)
	}
	cerr := f.Close()
	if err := errors.Join(werr, oerr, cerr); err != nil {
		parent.Remove(tmp)
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := parent.Rename(tmp, base); err != nil {
		parent.Remove(tmp)
		return w.classify(p, rel, err)
	}
	return nil
}

// writeThrough writes to the target of a symlink at rel; os.Root follows
// it only while it stays inside the workspace.
func (w *Workspace) writeThrough(p, rel string, data []byte) error {
	f, err := w.root.OpenFile(rel, os.O_WRONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return w.classify(p, rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	if err := checkRegular(p, fi); err != nil {
		return err
	}
	// The link may have been swapped since it was checked: judge the
	// file that was opened.
	if len(w.readOnly) > 0 {
		canon, err := w.canonical(p, f)
		if err != nil {
			return err
		}
		if err := w.refuseReadOnly(p, canon); err != nil {
			return err
		}
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return f.Close()
}

// ReadDir lists the directory at p.
func (w *Workspace) ReadDir(p string) ([]fs.DirEntry, error) {
	rel, err := w.Directory(p)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(w.FS(), filepath.ToSlash(rel))
	if errors.Is(err, wsfile.ErrNotRegular) { // swapped since Directory
		return nil, &PathError{Path: p, Reason: "is not a directory", Err: ErrNotDirectory}
	}
	if err != nil {
		return nil, w.classify(p, rel, err)
	}
	return entries, nil
}

// Remove deletes the file (or symlink, or empty directory) at p.
func (w *Workspace) Remove(p string) error {
	rel, err := w.Rel(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return denied(p, ErrDenied, "the workspace itself cannot be removed")
	}
	if err := w.checkWritable(p, rel); err != nil {
		return err
	}
	parent, err := wsfile.OpenDir(w.root, filepath.Dir(rel))
	if err != nil {
		return w.classify(p, rel, err)
	}
	defer parent.Close()
	if err := w.checkIn(p, parent, filepath.Base(rel)); err != nil {
		return err
	}
	if err := parent.Remove(filepath.Base(rel)); err != nil {
		return w.classify(p, rel, err)
	}
	return nil
}
