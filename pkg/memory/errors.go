package memory

import "errors"

var (
	// ErrConflict means another writer changed the record first; re-read
	// and try again.
	ErrConflict = errors.New("memory: concurrent update")
	// ErrNotFound means there is no such record.
	ErrNotFound = errors.New("memory: not found")
	// ErrBadScope means a scope key or scope name is not valid.
	ErrBadScope = errors.New("memory: bad scope")
	// ErrNotProvisioned means the memory streams do not exist: provision
	// [Assets] first.
	ErrNotProvisioned = errors.New("memory: streams not provisioned")
	// ErrForbidden means the caller's scope may not see or change the
	// record.
	ErrForbidden = errors.New("memory: not in your scope")
	// ErrInvalid means an argument is not acceptable.
	ErrInvalid = errors.New("memory: invalid argument")
	// ErrTooLarge means a record is larger than the bus accepts (the
	// server's max payload, or its bucket's or stream's max message
	// size): writing it again can never succeed.
	ErrTooLarge = errors.New("memory: too large for the bus")
)
