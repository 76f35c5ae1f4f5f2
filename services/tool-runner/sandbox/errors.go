package sandbox

import (
	"errors"
	"fmt"
)

var (
	// ErrDenied is matched by every refusal of the sandbox.
	ErrDenied = errors.New("denied by the sandbox")
	// ErrOutsideWorkspace: the path leads outside the workspace.
	ErrOutsideWorkspace = errors.New("outside the workspace")
	// ErrSpecialFile: the path is a device, FIFO or socket.
	ErrSpecialFile = errors.New("not a regular file")
	// ErrHardLink: the file has several hard links and may alias a file
	// outside the workspace.
	ErrHardLink = errors.New("hard-linked file")
	// ErrReadOnly: the path belongs to the agent's profile, which
	// sessions may not change.
	ErrReadOnly = errors.New("read-only in this workspace")
	// ErrSandboxUnavailable: commands cannot be confined (bubblewrap
	// missing or failing) and are refused. It matches ErrDenied.
	ErrSandboxUnavailable = fmt.Errorf("sandbox unavailable: %w", ErrDenied)
	// ErrTimeout: the command ran out of time and was killed.
	ErrTimeout = errors.New("command timed out")
	// ErrIsDirectory: a file was expected.
	ErrIsDirectory = errors.New("is a directory")
	// ErrNotDirectory: a directory was expected.
	ErrNotDirectory = errors.New("not a directory")
)

// PathError is a refused or failed access to a workspace path. Its message
// is written for a model: it says what was asked and why not.
type PathError struct {
	// Path as the caller gave it.
	Path string
	// Reason in words, e.g. "is outside the workspace".
	Reason string
	// Err is one of the sentinels above, or fs.ErrNotExist.
	Err error
}

func (e *PathError) Error() string {
	if e.denial() {
		return fmt.Sprintf("access to %q denied: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("%q: %s", e.Path, e.Reason)
}

func (e *PathError) denial() bool {
	switch e.Err {
	case ErrDenied, ErrOutsideWorkspace, ErrSpecialFile, ErrHardLink, ErrReadOnly:
		return true
	}
	return false
}

// Unwrap returns the sentinel and, for refusals, ErrDenied.
func (e *PathError) Unwrap() []error {
	if e.denial() {
		return []error{e.Err, ErrDenied}
	}
	return []error{e.Err}
}

func denied(path string, sentinel error, reason string) error {
	return &PathError{Path: path, Reason: reason, Err: sentinel}
}
