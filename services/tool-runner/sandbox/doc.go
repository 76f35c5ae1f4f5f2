// Package sandbox confines what a tool call can touch to its workspace.
//
// File access goes through a [Workspace], an [os.Root] opened on the
// workspace directory: paths are resolved beneath it component by
// component, so "..", absolute paths, "~" and symlinks cannot lead out of
// it. On top of os.Root, a Workspace refuses device files, FIFOs and
// sockets (reading /dev/zero or a FIFO would hang or never end) and
// regular files with more than one hard link (a hard link is
// indistinguishable from the file it aliases, which may live outside the
// workspace). Writes replace files atomically (temp file + rename), so
// several tool runners sharing one workspace volume never leave a torn
// file, and a hard link planted in the workspace is replaced, never
// written through.
//
// Commands run through an [Executor]. In the default mode, "bwrap", each
// command runs in bubblewrap:
//
//   - new user, PID, IPC, UTS and cgroup namespaces, and a new network
//     namespace (only loopback inside) unless the config grants network;
//   - uid and gid 65534 inside the user namespace, all capabilities
//     dropped, no further user namespaces, a new session (no TIOCSTI into
//     the runner's terminal);
//   - on the host, an unprivileged user: a runner running as root starts
//     bwrap as tools.exec.hostUid/hostGid (65534 by default), so the
//     sandbox is not host root in disguise (root-owned files would be its
//     own, and the kernel does not enforce RLIMIT_NPROC for root), and
//     workspaces are given to that user ([WithOwner], [Executor.Owner]);
//   - a read-only root built from /usr, the /bin, /sbin and /lib* links or
//     directories, and a minimal /etc; a fresh /proc and /dev; a private
//     tmpfs on /tmp; the workspace bound read-write at its own path and
//     nothing else of the host's file system;
//   - rlimits on address space, CPU time, file size, open files and
//     processes, applied by prlimit inside the namespaces (RLIMIT_NPROC is
//     then counted per sandbox, not per host user);
//   - an environment built from an allow-list: PATH, HOME (the workspace),
//     TMPDIR, LANG and the names the operator lists; nothing else of the
//     runner's environment (its API keys) gets in;
//   - --die-with-parent: when the runner dies, the sandbox dies with it.
//
// A timeout kills the command's whole process group with SIGKILL; in bwrap
// mode that takes down bwrap and with it the sandbox's PID namespace, so
// nothing survives, not even a process that ignores SIGTERM or left the
// process group. Output (stdout and stderr interleaved) is captured with a
// cap: the first and last halves are kept and what lies between is only
// counted, so a command printing gigabytes costs no memory.
//
// Before the first command the Executor probes bubblewrap with the same
// options. If bwrap is missing or the probe fails, every command is
// refused with [ErrSandboxUnavailable] and the reason; there is no silent
// fallback. Mode "none" (an explicit operator opt-out) runs commands
// directly, still as the unprivileged host user, with the rlimits,
// scrubbed environment, process-group timeout and output cap, but with the
// host's file system and network; a process that leaves the process
// group (setsid) escapes the timeout there, and the process limit counts
// all processes of the host user.
package sandbox
