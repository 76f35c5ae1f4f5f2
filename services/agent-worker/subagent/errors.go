package subagent

import "errors"

var (
	// ErrLimit means the session already runs its maximum of subagents.
	ErrLimit = errors.New("subagent limit reached")
	// ErrNested means a subagent tried to spawn one.
	ErrNested = errors.New("a subagent cannot spawn subagents")
)
