// Package wsfile is how trusted processes (the memory-consolidator's file
// sync, profile seeding, the tool runner) touch files in a workspace that a
// sandboxed command can write at the same time.
//
// Every access goes through an [os.Root] opened on the workspace, so
// nothing it does can land outside the workspace, whatever the sandbox
// renames or links meanwhile. On top of that a [Dir] follows no symlink at
// all, in any component: each directory on the way is checked with Lstat
// and the directory then opened is checked to be that same inode, so a
// "memory -> /host/dir" planted or swapped in is refused, not followed;
// it is opened only as a directory, so a FIFO swapped in is refused, not
// waited on ([OpenDir]).
// Files read must be regular with a single link (a hard link may alias a
// file elsewhere). Writes go to a temporary file in the opened parent
// directory and are renamed over the target, so a symlink or hard link at
// the target is replaced, never written through, and a parent directory
// swapped after it was opened only receives the file in its new place,
// which is still beneath the workspace.
//
// Run as root, what a Dir creates (directories, written files) takes the
// owner of the directory it is created in: a root runner hands the
// workspace to an unprivileged user for exec, and a MEMORY.md or memory/
// that the file sync made root's could be read there but not changed.
package wsfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Dir is a directory opened for trusted access. Safe for concurrent use.
type Dir struct {
	root *os.Root
}

// Open opens dir, which the operator configured (it is not checked for
// symlinks itself; everything beneath it is). Its error is os.OpenRoot's
// *fs.PathError, which names dir already ("open /ws: no such file or
// directory").
func Open(dir string) (*Dir, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Dir{root: r}, nil
}

// OpenRoot wraps an os.Root the caller keeps open (and closes).
func OpenRoot(r *os.Root) *Dir { return &Dir{root: r} }

// Close releases the directory.
func (d *Dir) Close() error { return d.root.Close() }

// Name is the directory's path as opened.
func (d *Dir) Name() string { return d.root.Name() }

// split checks rel and returns its directory components and base name.
func split(rel string) ([]string, string, error) {
	if rel == "" || filepath.IsAbs(rel) {
		return nil, "", fmt.Errorf("%q: %w", rel, ErrOutside)
	}
	c := filepath.Clean(rel)
	if c == "." || c == ".." || strings.HasPrefix(c, ".."+string(filepath.Separator)) {
		return nil, "", fmt.Errorf("%q: %w", rel, ErrOutside)
	}
	parts := strings.Split(c, string(filepath.Separator))
	return parts[:len(parts)-1], parts[len(parts)-1], nil
}

// parent opens the directory holding rel without following symlinks,
// creating missing directories when create is set. The caller closes the
// returned root unless it is d.root.
func (d *Dir) parent(rel string, create bool) (*os.Root, string, error) {
	dirs, base, err := split(rel)
	if err != nil {
		return nil, "", err
	}
	cur := d.root
	fail := func(err error) (*os.Root, string, error) {
		if cur != d.root {
			cur.Close()
		}
		return nil, "", err
	}
	for i, name := range dirs {
		at := filepath.Join(dirs[:i+1]...)
		fi, err := cur.Lstat(name)
		made := false
		if errors.Is(err, fs.ErrNotExist) && create {
			if err := cur.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fail(fmt.Errorf("create %s: %w", at, err))
			}
			made = true
			fi, err = cur.Lstat(name)
		}
		if err != nil {
			return fail(fmt.Errorf("%s: %w", at, err))
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fail(fmt.Errorf("%s: %w", at, ErrSymlink))
		}
		if !fi.IsDir() {
			return fail(fmt.Errorf("%s: %w", at, syscall.ENOTDIR))
		}
		next, err := OpenDir(cur, name)
		if err != nil {
			return fail(fmt.Errorf("open %s: %w", at, err))
		}
		// Swapped for a symlink between the Lstat and the open: os.Root
		// kept it beneath the workspace, and this refuses it anyway.
		opened, err := next.Stat(".")
		if err != nil || !os.SameFile(fi, opened) {
			next.Close()
			return fail(fmt.Errorf("%s: %w", at, ErrSymlink))
		}
		if made {
			if err := takeOwner(cur, func(uid, gid int) error { return next.Lchown(".", uid, gid) }); err != nil {
				next.Close()
				return fail(fmt.Errorf("create %s: %w", at, err))
			}
		}
		if cur != d.root {
			cur.Close()
		}
		cur = next
	}
	return cur, base, nil
}

// CheckRegular refuses anything but a regular file with one link.
func CheckRegular(fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return ErrSymlink
	case !fi.Mode().IsRegular():
		return ErrNotRegular
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return fmt.Errorf("%w (%d links)", ErrHardLink, st.Nlink)
	}
	return nil
}

// Lstat describes rel itself, reached without following symlinks.
func (d *Dir) Lstat(rel string) (fs.FileInfo, error) {
	p, base, err := d.parent(rel, false)
	if err != nil {
		return nil, err
	}
	if p != d.root {
		defer p.Close()
	}
	return p.Lstat(base)
}

// Open opens the regular file rel for reading (the caller closes it).
// Symlinks, hard-linked files and special files are refused.
func (d *Dir) Open(rel string) (*os.File, fs.FileInfo, error) {
	p, base, err := d.parent(rel, false)
	if err != nil {
		return nil, nil, err
	}
	if p != d.root {
		defer p.Close()
	}
	return openIn(p, rel, base)
}

func openIn(p *os.Root, rel, base string) (*os.File, fs.FileInfo, error) {
	before, err := p.Lstat(base)
	if err != nil {
		return nil, nil, err
	}
	if err := CheckRegular(before); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", rel, err)
	}
	// O_NONBLOCK: a FIFO swapped in must not block the open.
	f, err := p.OpenFile(base, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = CheckRegular(fi)
		if err == nil && !os.SameFile(before, fi) {
			err = ErrSymlink
		}
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", rel, err)
	}
	return f, fi, nil
}

// ReadFile reads the regular file rel, refusing more than max bytes
// (0: no limit). It returns the file's info too.
func (d *Dir) ReadFile(rel string, max int64) ([]byte, fs.FileInfo, error) {
	f, fi, err := d.Open(rel)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if max > 0 && fi.Size() > max {
		return nil, nil, fmt.Errorf("%s is %d bytes: %w (limit %d)", rel, fi.Size(), ErrTooLarge, max)
	}
	r := io.Reader(f)
	if max > 0 {
		r = io.LimitReader(f, max+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", rel, err)
	}
	if max > 0 && int64(len(data)) > max {
		return nil, nil, fmt.Errorf("%s grew: %w (limit %d)", rel, ErrTooLarge, max)
	}
	return data, fi, nil
}

// ReadDir lists the directory rel ("." for the directory itself),
// reached without following symlinks.
func (d *Dir) ReadDir(rel string) ([]fs.DirEntry, error) {
	if filepath.Clean(rel) == "." {
		return fs.ReadDir(d.root.FS(), ".")
	}
	// The parent of a name inside rel is rel itself.
	p, _, err := d.parent(filepath.Join(rel, "x"), false)
	if err != nil {
		return nil, err
	}
	if p != d.root {
		defer p.Close()
	}
	return fs.ReadDir(p.FS(), ".")
}

// WriteOptions change how [Dir.WriteFile] writes.
type WriteOptions struct {
	// Perm of a new file; default 0o644.
	Perm fs.FileMode
	// Unless, when set, is called just before the rename with the
	// target's current content (ok false when there is no regular file
	// to read); an error from it cancels the write and is returned.
	Unless func(current []byte, ok bool) error
	// UnlessMax bounds what Unless is given: a current file larger
	// than this (or growing past it while read) is passed as no regular
	// file, as [Dir.ReadFile] with the same bound refuses it. The target
	// is the sandbox's to fill (a sparse file costs no quota), so it is
	// never read whole. Default 4 MiB.
	UnlessMax int64
}

// DefaultUnlessMax is [WriteOptions.UnlessMax] when unset.
const DefaultUnlessMax = 4 << 20

// WriteFile replaces rel with data, creating missing parent directories.
// The data goes to a temporary file in rel's directory, opened without
// following symlinks, and is renamed over rel: a symlink or hard link at
// rel is replaced, never written through.
func (d *Dir) WriteFile(rel string, data []byte, o WriteOptions) error {
	p, base, err := d.parent(rel, true)
	if err != nil {
		return err
	}
	if p != d.root {
		defer p.Close()
	}
	if fi, err := p.Lstat(base); err == nil && fi.IsDir() {
		return fmt.Errorf("%s: %w", rel, syscall.EISDIR)
	}
	perm := o.Perm
	if perm == 0 {
		perm = 0o644
	}
	tmp := "." + base + ".nanofleet-" + randomHex() + ".tmp"
	f, err := p.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	_, werr := f.Write(data)
	oerr := takeOwner(p, f.Chown)
	if err := errors.Join(werr, oerr, f.Close()); err != nil {
		_ = p.Remove(tmp)
		return fmt.Errorf("write %s: %w", rel, err)
	}
	if o.Unless != nil {
		cur, ok, err := readBounded(p, rel, base, o.UnlessMax)
		if err != nil {
			_ = p.Remove(tmp)
			return err
		}
		if err := o.Unless(cur, ok); err != nil {
			_ = p.Remove(tmp)
			return err
		}
	}
	if err := p.Rename(tmp, base); err != nil {
		_ = p.Remove(tmp)
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return nil
}

// readBounded reads the regular file base in p for [WriteOptions.Unless]:
// ok false when there is none, or when it holds more than max bytes
// (default DefaultUnlessMax).
func readBounded(p *os.Root, rel, base string, max int64) (data []byte, ok bool, err error) {
	if max <= 0 {
		max = DefaultUnlessMax
	}
	g, fi, err := openIn(p, rel, base)
	if err != nil || fi.Size() > max {
		if g != nil {
			g.Close()
		}
		return nil, false, nil
	}
	defer g.Close()
	data, err = io.ReadAll(io.LimitReader(g, max+1))
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", rel, err)
	}
	if int64(len(data)) > max {
		return nil, false, nil
	}
	return data, true, nil
}

// takeOwner gives what chown changes the owner of the directory dir,
// when this process is root and that owner is another (see the package
// comment); it does nothing otherwise.
func takeOwner(dir *os.Root, chown func(uid, gid int) error) error {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := dir.Stat(".")
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || (st.Uid == 0 && st.Gid == 0) {
		return nil
	}
	return chown(int(st.Uid), int(st.Gid))
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
