package main

import (
	"errors"
	"fmt"
	"strings"
)

// errUsage matches every [usageError].
var errUsage = errors.New("command line not usable")

// usageError is a command line that cannot be used. [exitCode] prints
// msg (when set) and usage on stderr and exits 2.
type usageError struct {
	msg   string // what is wrong; empty when nothing was asked (a command without its subcommand)
	usage string // usage lines, each ending in a newline
	err   error  // what msg was made of, for errors.Is
}

func (e *usageError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return strings.TrimSpace(e.usage)
}

func (e *usageError) Unwrap() error { return e.err }

func (e *usageError) Is(target error) bool { return target == errUsage }

// argError is a subcommand's argument that cannot be used (a revision
// that is not a number); the command set adds the usage. Its text says
// what is wrong with the argument.
type argError struct{ err error }

func (e *argError) Error() string { return e.err.Error() }
func (e *argError) Unwrap() error { return e.err }

// badArg returns an [argError].
func badArg(format string, a ...any) error { return &argError{fmt.Errorf(format, a...)} }
