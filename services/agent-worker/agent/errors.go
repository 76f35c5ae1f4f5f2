package agent

import "errors"

// ErrModel wraps a model failure that ended the turn.
var ErrModel = errors.New("model failed")
