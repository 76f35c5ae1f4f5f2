package config

import (
	"errors"
	"fmt"
	"slices"
)

// ErrInvalid is matched by every error that names a bad key, whichever
// package's Validate reported it.
var ErrInvalid = errors.New("invalid config")

// Error is a bad value at one key of the config file. Every Validate of a
// config section returns one, so that all of them read alike and match
// [ErrInvalid].
type Error struct {
	// Key is the full key path from the file's root, e.g.
	// "tools.exec.timeout"; empty when the file as a whole is bad.
	Key string
	// Err says what is wrong with the value.
	Err error
}

// Invalid returns an *Error naming key, its reason formatted as by
// fmt.Errorf (so %w keeps an underlying error in the chain).
func Invalid(key, format string, args ...any) error {
	return &Error{Key: key, Err: fmt.Errorf(format, args...)}
}

func (e *Error) Error() string {
	if e.Key == "" {
		return ErrInvalid.Error() + ": " + e.Err.Error()
	}
	return ErrInvalid.Error() + ": " + e.Key + ": " + e.Err.Error()
}

// Unwrap makes an Error match ErrInvalid and whatever its reason wraps.
func (e *Error) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// joinErrors is [errors.Join] that returns a lone error as it is, so that
// one bad key still reads, and matches, as its *Error.
func joinErrors(errs ...error) error {
	errs = slices.DeleteFunc(errs, func(err error) bool { return err == nil })
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}
