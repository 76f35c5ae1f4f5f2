package wsfile

import "errors"

var (
	// ErrSymlink: a component of the path is a symlink, or was replaced
	// while it was being opened.
	ErrSymlink = errors.New("symlinks are not followed here")
	// ErrHardLink: the file has several hard links.
	ErrHardLink = errors.New("hard-linked file")
	// ErrNotRegular: the file is a directory, device, FIFO or socket.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file is larger than the caller reads.
	ErrTooLarge = errors.New("file too large")
	// ErrOutside: the path is absolute or leads out with "..".
	ErrOutside = errors.New("path leads outside the directory")
)
