package session

import "errors"

var (
	// ErrConflict means another writer changed the session first.
	ErrConflict = errors.New("session: concurrent update")
	// ErrNotFound means the session has no such record.
	ErrNotFound = errors.New("session: not found")
)
