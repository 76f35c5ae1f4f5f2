package access

import "errors"

var (
	// ErrUnknownCode means the pairing code does not exist or expired.
	ErrUnknownCode = errors.New("access: unknown or expired pairing code")
	// ErrBadPolicy means a policy names a DM policy that does not exist.
	ErrBadPolicy = errors.New("access: unknown DM policy")
)
