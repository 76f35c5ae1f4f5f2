package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/nanofleet/nanofleet/pkg/wsfile"
)

func checkRegular(p string, fi fs.FileInfo) error {
	err := wsfile.CheckRegular(fi)
	switch {
	case err == nil:
		return nil
	case fi.IsDir():
		return &PathError{Path: p, Reason: "is a directory; use list_dir", Err: ErrIsDirectory}
	case errors.Is(err, wsfile.ErrHardLink):
		return denied(p, ErrHardLink, fmt.Sprintf("the file has %d hard links; hard-linked files are refused because they may alias a file outside the workspace", fi.Sys().(*syscall.Stat_t).Nlink))
	}
	return denied(p, ErrSpecialFile, fmt.Sprintf("it is a %s, not a regular file", describeMode(fi.Mode())))
}

func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "special file"
}

// classify turns an error of an os.Root operation into a PathError a
// model can act on: escaping symlinks become ErrOutsideWorkspace, missing
// files fs.ErrNotExist.
func (w *Workspace) classify(p, rel string, err error) error {
	if w.escapes(rel) {
		return denied(p, ErrOutsideWorkspace, "it resolves through a symlink to outside the workspace")
	}
	if errors.Is(err, fs.ErrNotExist) {
		return &PathError{Path: p, Reason: "no such file or directory in the workspace", Err: fs.ErrNotExist}
	}
	if errors.Is(err, syscall.ENOTDIR) {
		return &PathError{Path: p, Reason: "a parent of the path is not a directory", Err: ErrNotDirectory}
	}
	return err
}

// escapes reports whether resolving rel on the host leads out of the
// workspace. It mirrors os.Root's rules (absolute symlink targets and ".."
// above the root escape) to explain a refusal; os.Root enforces them.
func (w *Workspace) escapes(rel string) bool {
	_, out := w.walk(rel)
	return out
}

// resolve is rel with the symlinks inside the workspace followed, as far
// as they exist ("" when it leads out).
func (w *Workspace) resolve(rel string) string {
	canon, out := w.walk(rel)
	if out {
		return ""
	}
	return canon
}

func (w *Workspace) walk(rel string) (string, bool) {
	cur := w.dir
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for hops := 0; len(parts) > 0; {
		name := parts[0]
		parts = parts[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if cur == w.dir {
				return "", true
			}
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			break
		}
		target, err := os.Readlink(next)
		if err != nil {
			break
		}
		if filepath.IsAbs(target) {
			return "", true
		}
		parts = append(strings.Split(filepath.ToSlash(target), "/"), parts...)
	}
	canon, err := filepath.Rel(w.dir, filepath.Join(cur, filepath.Join(parts...)))
	if err != nil {
		return "", true
	}
	return canon, false
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
