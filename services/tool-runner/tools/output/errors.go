package output

import "errors"

// ErrUnknownRef: the reference does not name a stored output of this
// session.
var ErrUnknownRef = errors.New("unknown output reference")
