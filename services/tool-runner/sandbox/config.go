package sandbox

import (
	"math"
	"regexp"

	"github.com/nanofleet/nanofleet/pkg/config"
)

// Mode selects how commands are confined.
type Mode string

// UnmarshalText leaves the mode as it is for "": nanobot writes
// "sandbox": "" for no setting, which asks for the default.
func (m *Mode) UnmarshalText(b []byte) error {
	if len(b) > 0 {
		*m = Mode(b)
	}
	return nil
}

const (
	// ModeBwrap runs every command in bubblewrap. The default.
	ModeBwrap Mode = "bwrap"
	// ModeNone runs commands without namespaces: an explicit operator
	// opt-out for hosts where bubblewrap cannot run.
	ModeNone Mode = "none"
)

// Limits are the rlimits of a command. Zero means unlimited.
type Limits struct {
	// AddressSpaceMB bounds virtual memory (RLIMIT_AS).
	AddressSpaceMB int64 `json:"addressSpaceMb"`
	// CPUSeconds bounds CPU time (RLIMIT_CPU).
	CPUSeconds int64 `json:"cpuSeconds"`
	// FileSizeMB bounds the size of any file written (RLIMIT_FSIZE).
	FileSizeMB int64 `json:"fileSizeMb"`
	// OpenFiles bounds open file descriptors (RLIMIT_NOFILE).
	OpenFiles int64 `json:"openFiles"`
	// Processes bounds the processes of one sandbox (RLIMIT_NPROC).
	Processes int64 `json:"processes"`
}

// Config configures the sandbox. Its JSON keys live under tools.exec.
type Config struct {
	// Sandbox is "bwrap" (default) or "none".
	Sandbox Mode `json:"sandbox"`
	// Network lets commands reach the network. bwrap mode then shares
	// the runner's network namespace, loopback services (such as a local
	// NATS server) included, and the web tools' address guard does not
	// apply to commands: grant it only where that is acceptable.
	Network bool `json:"network"`
	// Env lists environment variables passed from the runner's
	// environment to commands, besides PATH, HOME, TMPDIR and LANG which
	// are always set. Never list secrets here.
	Env []string `json:"env"`
	// Limits are the rlimits of every command.
	Limits Limits `json:"limits"`
	// BwrapPath is the bubblewrap binary; default "bwrap" from PATH.
	BwrapPath string `json:"bwrapPath"`
	// PrlimitPath is util-linux's prlimit, run inside the sandbox to set
	// the rlimits; default "prlimit" from PATH (it must live under /usr or
	// /bin, which the sandbox sees).
	PrlimitPath string `json:"prlimitPath"`
	// TmpSizeMB bounds the private /tmp of a sandbox.
	TmpSizeMB int64 `json:"tmpSizeMb"`
	// HostUID and HostGID are the host ids commands run as when the
	// runner itself runs as root (default 65534, "nobody"). Running the
	// sandbox as host root would make files owned by root writable inside
	// it and would exempt it from the process limit, so the runner drops
	// to these ids first, and gives them what it creates in workspaces.
	// Ignored when the runner is not root: commands then run as the
	// runner's own user.
	HostUID int `json:"hostUid"`
	HostGID int `json:"hostGid"`
}

// DefaultConfig is bubblewrap without network and with moderate limits.
func DefaultConfig() Config {
	return Config{
		Sandbox: ModeBwrap,
		Env:     []string{"LANG", "LC_ALL", "TZ", "TERM"},
		Limits: Limits{
			AddressSpaceMB: 4096,
			CPUSeconds:     600,
			FileSizeMB:     1024,
			OpenFiles:      1024,
			Processes:      256,
		},
		BwrapPath:   "bwrap",
		PrlimitPath: "prlimit",
		TmpSizeMB:   512,
		HostUID:     65534,
		HostGID:     65534,
	}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidEnvName reports whether name can be an environment variable's name.
func ValidEnvName(name string) bool { return envName.MatchString(name) }

// fixedEnv are set by the sandbox itself and cannot be passed through.
var fixedEnv = map[string]bool{"PATH": true, "HOME": true, "TMPDIR": true, "PWD": true}

// Validate reports every invalid setting by its config key, joined.
// maxHostID is the largest id a process can run as: the kernel's ids are
// 32-bit, and the last one, (uid_t)-1, means no id.
const maxHostID = math.MaxUint32 - 1

// maxMB is the largest size in MB that is still a size in bytes: the
// limits are shifted to bytes (<<20), and a larger value wraps around
// int64 to a negative size or to 0, which means unlimited.
const maxMB = math.MaxInt64 >> 20

func (c Config) Validate() error {
	var p config.Problems
	switch c.Sandbox {
	case ModeBwrap, ModeNone:
	default:
		p.Add("tools.exec.sandbox", "%q is not \"bwrap\" or \"none\"", c.Sandbox)
	}
	for _, name := range c.Env {
		if !ValidEnvName(name) {
			p.Add("tools.exec.env", "%q is not an environment variable name", name)
		} else if fixedEnv[name] {
			p.Add("tools.exec.env", "%s is set by the sandbox and cannot be passed through", name)
		}
	}
	lim := []struct {
		key    string
		v, max int64
	}{
		{"addressSpaceMb", c.Limits.AddressSpaceMB, maxMB},
		{"cpuSeconds", c.Limits.CPUSeconds, math.MaxInt64},
		{"fileSizeMb", c.Limits.FileSizeMB, maxMB},
		{"openFiles", c.Limits.OpenFiles, math.MaxInt64},
		{"processes", c.Limits.Processes, math.MaxInt64},
	}
	for _, l := range lim {
		switch {
		case l.v < 0:
			p.Add("tools.exec.limits."+l.key, "%d is negative (0 means unlimited)", l.v)
		case l.v > l.max:
			p.Add("tools.exec.limits."+l.key, "%d; want 0..%d (0 means unlimited)", l.v, l.max)
		}
	}
	if c.Limits.OpenFiles > 0 && c.Limits.OpenFiles < 16 {
		p.Add("tools.exec.limits.openFiles", "%d is too low for a shell (at least 16)", c.Limits.OpenFiles)
	}
	if c.Limits.Processes > 0 && c.Limits.Processes < 4 {
		p.Add("tools.exec.limits.processes", "%d is too low for a shell pipeline (at least 4)", c.Limits.Processes)
	}
	// The kernel takes 32-bit ids: a larger one is cut to its low 32 bits
	// (a root runner ran `id -u` with 4294967296 as 0), and 4294967295 is
	// (uid_t)-1, no id, which fails every exec (EINVAL).
	if c.HostUID <= 0 || c.HostUID > maxHostID {
		p.Add("tools.exec.hostUid", "%d; want 1..%d: commands must not run as host root (use an unprivileged uid such as 65534)", c.HostUID, maxHostID)
	}
	if c.HostGID <= 0 || c.HostGID > maxHostID {
		p.Add("tools.exec.hostGid", "%d; want 1..%d: commands must not run with host group root (use an unprivileged gid such as 65534)", c.HostGID, maxHostID)
	}
	if c.TmpSizeMB < 0 || c.TmpSizeMB > maxMB {
		p.Add("tools.exec.tmpSizeMb", "%d; want 0..%d (0 means unbounded)", c.TmpSizeMB, maxMB)
	}
	return p.Err()
}
