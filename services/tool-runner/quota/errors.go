package quota

import (
	"errors"
	"fmt"
)

// ErrExceeded is wrapped by every refusal for the quota.
var ErrExceeded = errors.New("workspace quota exceeded")

// ErrDiskLow is wrapped by every refusal for [Limits.KeepFree].
var ErrDiskLow = errors.New("the disk holding the workspace is nearly full")

// UnmeasurableError is an entry of a workspace that Measure could not
// count: a directory that cannot be read or is nested too deep. A
// command may make one on purpose, and a quota that gave up then would
// no longer bound anything: [Meter] treats the workspace as over its
// quota until the entry is gone.
type UnmeasurableError struct {
	Path string // relative to the workspace
	Err  error
}

func (e *UnmeasurableError) Error() string {
	return fmt.Sprintf("measure workspace: %q: %v", e.Path, e.Err)
}

func (e *UnmeasurableError) Unwrap() error { return e.Err }
