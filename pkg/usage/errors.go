package usage

import "errors"

// ErrContention means a count kept changing under an add: more
// concurrent adds to one user's day than its attempts.
var ErrContention = errors.New("usage: too many concurrent updates")
