package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Reachable reports the first directory on the way to dir that uid may
// not pass through (it lacks the others' search bit and is not uid's), with
// the command that fixes it. A root runner's commands and MCP servers run
// as uid; bubblewrap cannot bind a workspace they cannot reach and says
// only "Can't find source path … Permission denied".
func Reachable(dir string, uid int) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm()&0o001 == 0 && (st == nil || int(st.Uid) != uid) {
			return &fs.PathError{Op: "search", Path: d, Err: fmt.Errorf("%w: not searchable by uid %d (tools.exec.hostUid), which exec and MCP servers run as; run `chmod o+x %s` (lets others pass through, not list it) or move the workspace (agents.defaults.workspace, tools.workspace.root) out of it", ErrSandboxUnavailable, uid, d)}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
