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

// Problems collects the invalid keys a Validate finds, so that it names
// every one at once rather than the first. The zero value is empty.
type Problems struct{ errs []error }

// Add records key as invalid, its reason formatted as by [Invalid].
func (p *Problems) Add(key, format string, args ...any) {
	p.errs = append(p.errs, Invalid(key, format, args...))
}

// Join records err, what a nested Validate returned (nil: nothing). A
// join stays one error: it prints, and matches, as its parts.
func (p *Problems) Join(err error) {
	if err != nil {
		p.errs = append(p.errs, err)
	}
}

// Err returns the problems recorded, joined, a lone one as it is; nil
// when there are none.
func (p *Problems) Err() error { return joinErrors(p.errs...) }
