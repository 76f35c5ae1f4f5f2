package fleetdir

import (
	"errors"
	"fmt"
	"path/filepath"
)

// ErrNotRunning means no process holds the data directory's lock.
var ErrNotRunning = errors.New("no fleet runs on this data directory")

// LockedError is returned by [Acquire] when another process holds the
// lock. Info is nil when the holder has not written fleet.json yet.
type LockedError struct {
	Dir  string
	Info *Info
}

func (e *LockedError) Error() string {
	if e.Info == nil {
		return fmt.Sprintf("a fleet already runs on %s (another process holds %s)", e.Dir, filepath.Join(e.Dir, lockName))
	}
	return fmt.Sprintf("a fleet already runs on %s: %s", e.Dir, e.Info)
}
