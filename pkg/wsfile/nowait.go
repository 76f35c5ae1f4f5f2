package wsfile

// Opening beneath a root without waiting on what a sandboxed command may
// have put there (a FIFO in place of a directory or a file).

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// OpenDir opens the directory name beneath r as a root of its own,
// following symlinks beneath r as [os.Root.OpenRoot] does, but never
// opens anything else. OpenRoot opens its last component without
// O_DIRECTORY: a FIFO there, which a sandboxed command can make or swap
// in after the caller checked the name, held the open (and the caller,
// and its shutdown) until something wrote to the FIFO, which nothing
// does. Here that component is opened as a directory on the way to "."
// in it, so a FIFO, file or device is syscall.ENOTDIR at once.
func OpenDir(r *os.Root, name string) (*os.Root, error) {
	return r.OpenRoot(name + string(filepath.Separator) + ".")
}

// FS is r as a read-only file system that never waits on what it opens.
// [os.Root.FS] opens with a plain O_RDONLY: a FIFO that a sandboxed
// command swapped in for a directory after the caller checked it (list a
// directory, walk a tree) held the open until something wrote to the
// FIFO, which nothing does. Here every name is opened with O_NONBLOCK,
// and anything but a directory or a regular file is refused
// ([ErrNotRegular]). Symlinks beneath r are followed as r follows them.
func FS(r *os.Root) fs.FS { return rootFS{r} }

type rootFS struct{ r *os.Root }

func (f rootFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	file, err := f.r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	fi, err := file.Stat()
	if err == nil && !fi.IsDir() && !fi.Mode().IsRegular() {
		err = &fs.PathError{Op: "open", Path: name, Err: ErrNotRegular}
	}
	if err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

// Stat opens nothing: [fs.WalkDir] asks it for the root of a walk.
func (f rootFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	return f.r.Stat(name)
}
