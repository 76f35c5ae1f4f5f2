package storeguard

import (
	"errors"
	"fmt"
)

// ErrFull is the sentinel every full-store error wraps.
var ErrFull = errors.New("storage full")

// FullError says what is full.
type FullError struct {
	// What is full: "the filesystem of <dir>" or "the JetStream store
	// limit".
	What  string
	Free  int64
	Total int64
}

func (e *FullError) Error() string {
	return fmt.Sprintf("storage full: %s has %s free of %s", e.What, size(e.Free), size(e.Total))
}

func (e *FullError) Unwrap() error { return ErrFull }
