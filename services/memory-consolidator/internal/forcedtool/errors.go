package forcedtool

import "errors"

// ErrBadAnswer means the answer could not be read: a call whose arguments
// its schema rejects, or a text that holds no JSON object.
var ErrBadAnswer = errors.New("unusable model answer")
