package usage

import "errors"

// ErrContention means a count kept changing under an add until its
// deadline.
var ErrContention = errors.New("usage: too many concurrent updates")
