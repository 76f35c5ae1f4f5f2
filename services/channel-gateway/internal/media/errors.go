package media

import "errors"

// ErrTooLarge means an attachment is over the size limit.
var ErrTooLarge = errors.New("media: attachment too large")
