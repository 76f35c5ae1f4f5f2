package consolidator

import "errors"

// ErrBadAnswer means the model's answer could not be used.
var ErrBadAnswer = errors.New("consolidator: unusable model answer")

// ErrContention means a MEMORY.md kept changing under a consolidator.
var ErrContention = errors.New("consolidator: memory changed too often under us")
