// Package tools defines what a tool of the tool-runner is: its
// definition (name, description, arguments schema, scheduling flags) and
// a Run method that gets a [Call] with validated arguments and the
// workspace to work in. The tools themselves live in subpackages (files,
// patch, shell, web, output); the runner serves a [Set] of them.
//
// A tool reports failure by returning an error; [ErrorKind] maps it to the
// kind the model and the worker see (invalid arguments, denied by the
// sandbox, timeout, failed). A tool may return a partial Result together
// with an error (the output of a command that timed out); the runner shows
// both.
package tools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"

	"github.com/nanofleet/nanofleet/services/tool-runner/netguard"
	"github.com/nanofleet/nanofleet/services/tool-runner/quota"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
)

// Tool is one tool a runner serves.
type Tool interface {
	// Definition describes the tool; it does not change after start.
	Definition() toolschema.Tool
	// Run performs one call.
	Run(ctx context.Context, call *Call) (Result, error)
}

// Call is one invocation of a tool.
type Call struct {
	// ID is the model's tool call id.
	ID string
	// SessionKey and AgentID say whose call it is.
	SessionKey string
	AgentID    string
	// Args are the arguments, parsed and validated against the tool's
	// schema, defaults applied; decode them with [toolschema.Decode].
	Args map[string]any
	// Workspace is the only part of the file system the call may use.
	Workspace *sandbox.Workspace
	// Blobs stores media and oversize output.
	Blobs Blobs
	// Log is the runner's logger with the call's attributes.
	Log *slog.Logger
	// FileSizeLimit bounds the files a command may grow, and how much an
	// edit may add, in bytes: the workspace's remaining quota (0: no
	// quota; negative: over it).
	FileSizeLimit int64
}

// Result is what a successful call returns.
type Result struct {
	// Text for the model.
	Text string
	// Media produced by the call, e.g. an image read_file stored.
	Media []*nanofleetv1.MediaRef
}

// Blobs is the part of a JetStream object store tools use;
// jetstream.ObjectStore implements it.
type Blobs interface {
	PutBytes(ctx context.Context, name string, data []byte) (*jetstream.ObjectInfo, error)
	GetBytes(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) ([]byte, error)
}

// Func adapts a definition and a function to a Tool.
type Func struct {
	Def toolschema.Tool
	Fn  func(ctx context.Context, call *Call) (Result, error)
}

// Definition implements Tool.
func (f Func) Definition() toolschema.Tool { return f.Def }

// Run implements Tool.
func (f Func) Run(ctx context.Context, call *Call) (Result, error) { return f.Fn(ctx, call) }

// ErrorKind classifies an error returned by a tool or by argument parsing.
func ErrorKind(err error) nanofleetv1.ToolErrorKind {
	switch {
	case err == nil:
		return nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_UNSPECIFIED
	case errors.Is(err, toolschema.ErrInvalidArguments):
		return nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_INVALID_ARGUMENTS
	case errors.Is(err, sandbox.ErrDenied), errors.Is(err, netguard.ErrBlocked), errors.Is(err, quota.ErrExceeded):
		return nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_DENIED
	case errors.Is(err, sandbox.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_TIMEOUT
	}
	return nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_FAILED
}

// Object name prefixes in the fleet's object store.
const (
	OutputPrefix = "tool-output/"
	MediaPrefix  = "tool-media/"
)

// SessionObjectPrefix is where objects of one session's tool calls are
// stored under prefix ([OutputPrefix] or [MediaPrefix]); read_tool_output
// reads only below its caller's own.
func SessionObjectPrefix(prefix, sessionKey string) string {
	return prefix + subject.Token(sessionKey) + "/"
}

// Set is the tools a runner serves, with compiled argument schemas.
type Set struct {
	tools   map[string]Tool
	schemas map[string]*toolschema.Schema
	names   []string
}

// NewSet compiles the tools' schemas and checks their names are unique.
func NewSet(ts ...Tool) (*Set, error) {
	s := &Set{tools: map[string]Tool{}, schemas: map[string]*toolschema.Schema{}}
	for _, t := range ts {
		def := t.Definition()
		if def.Name == "" || strings.ContainsAny(def.Name, " .*>") {
			return nil, fmt.Errorf("tool name %q: want letters, digits, '_' or '-'", def.Name)
		}
		if _, dup := s.tools[def.Name]; dup {
			return nil, fmt.Errorf("tool %s registered twice", def.Name)
		}
		schema, err := toolschema.Compile(def.Parameters)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", def.Name, err)
		}
		s.tools[def.Name] = t
		s.schemas[def.Name] = schema
		s.names = append(s.names, def.Name)
	}
	defs := s.Definitions()
	s.names = s.names[:0]
	for _, d := range defs {
		s.names = append(s.names, d.Name)
	}
	return s, nil
}

// Names lists the tools sorted by name.
func (s *Set) Names() []string { return append([]string(nil), s.names...) }

// Get returns a tool and its compiled schema.
func (s *Set) Get(name string) (Tool, *toolschema.Schema, bool) {
	t, ok := s.tools[name]
	return t, s.schemas[name], ok
}

// Definitions returns the tools' definitions sorted by name.
func (s *Set) Definitions() []toolschema.Tool {
	defs := make([]toolschema.Tool, 0, len(s.tools))
	for _, t := range s.tools {
		defs = append(defs, t.Definition())
	}
	toolschema.SortTools(defs)
	return defs
}
