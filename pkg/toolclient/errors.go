package toolclient

import "errors"

var (
	// ErrNoRunners: no tool-runner answered (catalog requests).
	ErrNoRunners = errors.New("no tool-runner is reachable")
	// ErrInvalidOption: an option's value is out of range.
	ErrInvalidOption = errors.New("toolclient: invalid option")
	// ErrBadResponse: a runner's answer could not be decoded.
	ErrBadResponse = errors.New("toolclient: malformed response")
)
