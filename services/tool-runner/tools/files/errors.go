package files

import "errors"

// ErrNoMatch and ErrAmbiguous are edit_file's failures.
var (
	ErrNoMatch   = errors.New("old_text not found")
	ErrAmbiguous = errors.New("old_text is not unique")
)

// ErrBinary: the file is neither text nor a supported image.
var ErrBinary = errors.New("binary file")
