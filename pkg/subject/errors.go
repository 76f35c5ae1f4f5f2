package subject

import "errors"

// ErrBadToken is returned by [ParseToken] for text [Token] cannot produce.
var ErrBadToken = errors.New("subject: malformed token")
