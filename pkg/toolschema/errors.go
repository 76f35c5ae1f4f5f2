package toolschema

import (
	"errors"
	"strings"
)

var (
	// ErrInvalidArguments is matched by every error [Schema.Parse] returns
	// for arguments that cannot be decoded or do not satisfy the schema.
	ErrInvalidArguments = errors.New("invalid arguments")
	// ErrInvalidSchema is returned by [Compile] for a parameters schema
	// that is not valid JSON Schema.
	ErrInvalidSchema = errors.New("invalid tool schema")
)

// Problem is one thing wrong with a call's arguments.
type Problem struct {
	// Path of the argument, e.g. "timeout" or "edits[0].path"; empty for
	// the arguments object as a whole.
	Path string
	// Message names the argument and the rule, ready to show a model.
	Message string
}

// ArgumentError lists everything wrong with a call's arguments. It
// matches [ErrInvalidArguments] with errors.Is.
type ArgumentError struct {
	Problems []Problem
}

func (e *ArgumentError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Message
	}
	return strings.Join(msgs, "; ")
}

// Is reports whether target is [ErrInvalidArguments].
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArguments }

func argError(path, msg string) *ArgumentError {
	return &ArgumentError{Problems: []Problem{{Path: path, Message: msg}}}
}
