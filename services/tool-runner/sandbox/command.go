package sandbox

import (
	"path/filepath"
	"strconv"
)

// env builds the command's environment from the allow-list.
func (e *Executor) env(workspace string) []string {
	env := []string{"PATH=" + systemPath, "HOME=" + workspace}
	if e.cfg.Sandbox == ModeBwrap {
		env = append(env, "TMPDIR=/tmp")
	}
	seen := map[string]bool{"LANG": false}
	for _, name := range e.cfg.Env {
		if v, ok := e.lookupEnv(name); ok {
			env = append(env, name+"="+v)
			seen[name] = true
		}
	}
	if !seen["LANG"] {
		env = append(env, "LANG=C.UTF-8")
	}
	return env
}

// prlimitArgs applies the configured limits, RLIMIT_FSIZE lowered to
// fileSizeLimit when that is lower; quota says it was.
func (e *Executor) prlimitArgs(fileSizeLimit int64) (args []string, quota bool) {
	fsize := e.cfg.Limits.FileSizeMB << 20
	switch {
	case fileSizeLimit < 0:
		fsize, quota = -1, true
	case fileSizeLimit > 0 && (fsize == 0 || fileSizeLimit < fsize):
		fsize, quota = fileSizeLimit, true
	}
	return e.cfg.Limits.PrlimitArgs(e.prlimitPath, fsize), quota
}

func (e *Executor) bwrapArgs(spec Spec) []string {
	a := e.bwrap.SystemArgs(e.cfg.Network, 4, e.cfg.TmpSizeMB)
	// The workspace's parent is an empty read-only tmpfs, so that "../x"
	// fails loudly instead of landing in a scratch directory.
	parent := filepath.Dir(spec.Workspace)
	roParent := parent != "/" && parent != "/tmp"
	if roParent {
		a = append(a, "--tmpfs", parent)
	}
	a = append(a, "--bind", spec.Workspace, spec.Workspace)
	// ExtraFiles: fds 3-5 are the status pipe, passwd and group.
	for i, b := range spec.ReadOnly {
		a = append(a, "--ro-bind-fd", strconv.Itoa(6+i), b.Dest)
	}
	if roParent {
		a = append(a, "--remount-ro", parent)
	}
	a = append(a, "--remount-ro", "/")
	a = append(a, "--chdir", spec.Dir)
	// The environment comes through a pipe (see EnvArgs), after the
	// read-only binds.
	a = append(a, "--args", strconv.Itoa(6+len(spec.ReadOnly)))
	return append(a, "--json-status-fd", "3")
}
