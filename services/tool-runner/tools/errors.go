package tools

import "errors"

// ErrFailed is a generic tool failure; tools wrap it or return their own
// errors.
var ErrFailed = errors.New("tool failed")
