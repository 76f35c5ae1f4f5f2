package quota

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// MaxDepth is how deep below the workspace Measure descends. A tree
// deeper than this is not measured (see [UnmeasurableError]): each level
// holds a directory open while its entries are counted.
const MaxDepth = 256

// measureTimeout bounds one measurement, which callers share: it runs
// apart from any one call's deadline.
const measureTimeout = 2 * time.Minute

// errTooDeep is why a directory past MaxDepth is not measured.
var errTooDeep = fmt.Errorf("nested more than %d directories deep", MaxDepth)

// Measure walks root without following symlinks. It stops counting once
// past stopFiles entries (0: never), the quota being exceeded by then,
// and when ctx ends. Each directory is read through a descriptor opened
// from its parent's, so the walk costs one call per entry however deep
// the tree, and takes names as the file system holds them (bytes, not
// necessarily UTF-8).
func Measure(ctx context.Context, root *os.Root, stopFiles int64) (Usage, error) {
	d, err := root.Open(".")
	if err != nil {
		return Usage{}, fmt.Errorf("measure workspace: %w", err)
	}
	w := walk{ctx: ctx, stop: stopFiles}
	err = w.dir(d, "", 0)
	if err != nil && !errors.Is(err, errStop) {
		if ctx.Err() != nil {
			return w.u, fmt.Errorf("measure workspace: %w", err)
		}
		return w.u, err
	}
	return w.u, nil
}

// errStop ends a walk that has counted enough.
var errStop = errors.New("stop")

// walk is one measurement under way.
type walk struct {
	ctx  context.Context
	stop int64
	u    Usage
}

// dir counts the entries below the open directory d, at path, and closes
// it.
func (w *walk) dir(d *os.File, path string, depth int) error {
	defer d.Close()
	fd := int(d.Fd())
	for {
		names, err := d.Readdirnames(1024)
		for _, name := range names {
			if err := w.entry(fd, name, join(path, name), depth); err != nil {
				return err
			}
		}
		switch {
		case errors.Is(err, io.EOF) || (err == nil && len(names) == 0):
			return nil
		case err != nil:
			return &UnmeasurableError{Path: cmp.Or(path, "."), Err: err}
		}
	}
}

// entry counts name in the directory fd, and below it if it is one.
func (w *walk) entry(fd int, name, path string, depth int) error {
	if w.u.Files%1024 == 0 && w.ctx.Err() != nil {
		return w.ctx.Err()
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) { // removed meanwhile
			return nil
		}
		return &UnmeasurableError{Path: path, Err: err}
	}
	w.u.Files++
	w.u.Bytes += st.Blocks * 512 // what the file system spends: a sparse file costs what it holds
	if w.stop > 0 && w.u.Files > w.stop {
		return errStop
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	if depth+1 > MaxDepth {
		return &UnmeasurableError{Path: path, Err: errTooDeep}
	}
	cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		return nil // removed or replaced meanwhile: counted as it was
	case err != nil:
		return &UnmeasurableError{Path: path, Err: err}
	}
	return w.dir(os.NewFile(uintptr(cfd), path), path, depth+1)
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
