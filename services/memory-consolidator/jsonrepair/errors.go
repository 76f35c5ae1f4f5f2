package jsonrepair

import "errors"

// ErrNoObject means the text holds nothing that could be a JSON object.
var ErrNoObject = errors.New("jsonrepair: no JSON object in text")
