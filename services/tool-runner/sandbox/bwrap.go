package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// UID and GID are the ids a sandboxed process (a command, an MCP server)
// runs as inside its user namespace ("nobody").
const (
	UID = 65534
	GID = 65534
)

// BwrapFeatures are the optional flags of the bubblewrap found here.
type BwrapFeatures struct {
	DisableUserns, UnshareCgroupTry bool
}

// ProbeBwrap asks the bubblewrap at path which optional flags it has; a
// bubblewrap that cannot say has none.
func ProbeBwrap(ctx context.Context, path string) BwrapFeatures {
	help, _ := exec.CommandContext(ctx, path, "--help").CombinedOutput()
	return BwrapFeatures{
		DisableUserns:    strings.Contains(string(help), "--disable-userns"),
		UnshareCgroupTry: strings.Contains(string(help), "--unshare-cgroup-try"),
	}
}

// SystemShows reports whether the binds of [BwrapFeatures.SystemArgs]
// show a sandboxed process the host path p (absolute and clean): /usr, the
// system directories, the /etc files bound (the network ones only with
// network), and the sandbox's own /proc and /dev. The host's /tmp is not
// among them: the sandbox has a tmpfs there.
func SystemShows(p string, network bool) bool {
	shown := append([]string{"/usr", "/proc", "/dev"}, systemDirs...)
	shown = append(shown, etcFiles...)
	if network {
		shown = append(shown, etcNetworkFiles...)
	}
	return slices.ContainsFunc(shown, func(root string) bool { return Within(p, root) })
}

// Within reports whether the clean path p is root or beneath it.
func Within(p, root string) bool {
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")
}

// SystemArgs start the bubblewrap command line of every sandboxed process
// of the tool runner: its own user ([UID], [GID]), PID, IPC and UTS
// namespaces, no capabilities, no network unless network; /usr, the
// system directories and the needed parts of /etc read-only;
// /etc/passwd and /etc/group read from fds passwdFD and passwdFD+1;
// /proc, /dev and a /tmp of tmpSizeMB (0: unbounded). The caller adds its
// own binds and environment.
func (f BwrapFeatures) SystemArgs(network bool, passwdFD int, tmpSizeMB int64) []string {
	a := []string{
		"--unshare-user", "--uid", strconv.Itoa(UID), "--gid", strconv.Itoa(GID),
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "sandbox",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
	}
	if f.DisableUserns {
		a = append(a, "--disable-userns")
	}
	if f.UnshareCgroupTry {
		a = append(a, "--unshare-cgroup-try")
	}
	if !network {
		a = append(a, "--unshare-net")
	}
	a = append(a, "--ro-bind", "/usr", "/usr")
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	etc := etcFiles
	if network {
		etc = append(slices.Clone(etcFiles), etcNetworkFiles...)
	}
	for _, f := range etc {
		a = append(a, "--ro-bind-try", f, f)
	}
	a = append(a, "--ro-bind-data", strconv.Itoa(passwdFD), "/etc/passwd", "--ro-bind-data", strconv.Itoa(passwdFD+1), "/etc/group")
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	if tmpSizeMB > 0 {
		a = append(a, "--size", strconv.FormatInt(tmpSizeMB<<20, 10))
	}
	return append(a, "--tmpfs", "/tmp")
}

// PrlimitArgs are the command line of prlimit at path, up to "--", that
// applies l; fsize (bytes) replaces l.FileSizeMB, and a negative fsize
// lets no file be written. Limits not above zero are left unset; core
// dumps are always off.
func (l Limits) PrlimitArgs(path string, fsize int64) []string {
	args := []string{path}
	add := func(flag string, v int64) {
		if v > 0 {
			args = append(args, "--"+flag+"="+strconv.FormatInt(v, 10))
		}
	}
	add("as", l.AddressSpaceMB<<20)
	add("cpu", l.CPUSeconds)
	if fsize < 0 {
		args = append(args, "--fsize=0")
	}
	add("fsize", fsize)
	add("nofile", l.OpenFiles)
	add("nproc", l.Processes)
	return append(args, "--core=0", "--")
}

// EnvArgs is a pipe holding bubblewrap's environment arguments
// (--clearenv, then --setenv for each NAME=value of env), NUL-separated,
// for bubblewrap's "--args FD". On the command line the values (an MCP
// server's API key, a variable passed through to exec) would be readable
// by every host user in /proc for as long as the sandbox runs, and be in
// any log of the command. The child gets the file; the caller closes its
// copy once the child has started.
func EnvArgs(env []string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("environment pipe: %w", err)
	}
	b := []byte("--clearenv\x00")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		b = append(append(append(b, "--setenv\x00"...), k+"\x00"...), v+"\x00"...)
	}
	// Written beside the start: an environment larger than the pipe's
	// buffer would block a synchronous write; without a reader (bwrap
	// did not start and the caller closed its copy) the write fails.
	go func() {
		_, _ = w.Write(b)
		w.Close()
	}()
	return r, nil
}
