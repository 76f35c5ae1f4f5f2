package wsfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// systemDir reports whether dir is one a workspace must not be: sessions
// write in their workspace, and a root runner gives it to
// tools.exec.hostUid.
func systemDir(dir string) bool {
	switch dir {
	case "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
		"/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp",
		"/usr", "/usr/bin", "/usr/lib", "/usr/local", "/usr/sbin", "/var", "/var/lib", "/var/tmp":
		return true
	}
	return false
}

// CheckWorkspaceRoot refuses a workspace directory that is the file
// system's root, a system directory, or a home directory or one of its
// parents: sessions write anywhere in their workspace and a root runner
// gives it to the sandbox user, so such a workspace would hand them the
// host. dir is judged as its links resolve, when it exists.
func CheckWorkspaceRoot(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if systemDir(abs) {
		return fmt.Errorf("%s is a system directory; the workspace must be a directory of its own, such as ~/.nanofleet/workspace", abs)
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		home = filepath.Clean(home)
		if real, err := filepath.EvalSymlinks(home); err == nil {
			home = real
		}
		for h := home; ; h = filepath.Dir(h) {
			if h == abs {
				return fmt.Errorf("%s holds the home directory %s; the workspace must be a directory of its own, such as ~/.nanofleet/workspace", abs, home)
			}
			if h == filepath.Dir(h) {
				break
			}
		}
	}
	return nil
}
