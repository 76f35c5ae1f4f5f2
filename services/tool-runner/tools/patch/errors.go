package patch

import "errors"

// ErrBadPatch: the patch text is malformed or does not match the files.
var ErrBadPatch = errors.New("patch rejected")
