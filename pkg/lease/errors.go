package lease

import "errors"

var (
	// ErrHeld means another holder has the lease.
	ErrHeld = errors.New("lease: held by another")
	// ErrLost means the lease expired or was taken over before renewal.
	ErrLost = errors.New("lease: lost")
)
