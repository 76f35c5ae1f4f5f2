package tools_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"

	"github.com/nanofleet/nanofleet/services/tool-runner/netguard"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

func tool(name, schema string) tools.Tool {
	return tools.Func{
		Def: toolschema.Tool{Name: name, Parameters: []byte(schema)},
		Fn:  func(context.Context, *tools.Call) (tools.Result, error) { return tools.Result{Text: name}, nil },
	}
}

func TestNewSet(t *testing.T) {
	s, err := tools.NewSet(tool("zeta", ""), tool("alpha", `{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Names(), ","); got != "alpha,zeta" {
		t.Errorf("names %s", got)
	}
	if _, schema, ok := s.Get("alpha"); !ok || schema == nil {
		t.Error("alpha missing")
	}
	for _, bad := range [][]tools.Tool{
		{tool("a", ""), tool("a", "")},
		{tool("", "")},
		{tool("a.b", "")},
		{tool("a", `{"type":"nope"}`)},
	} {
		if _, err := tools.NewSet(bad...); err == nil {
			t.Errorf("NewSet accepted %v", bad[0].Definition().Name)
		}
	}
}

func TestErrorKind(t *testing.T) {
	tests := []struct {
		err  error
		want nanofleetv1.ToolErrorKind
	}{
		{nil, nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_UNSPECIFIED},
		{fmt.Errorf("x: %w", toolschema.ErrInvalidArguments), nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_INVALID_ARGUMENTS},
		{&sandbox.PathError{Path: "p", Reason: "r", Err: sandbox.ErrOutsideWorkspace}, nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_DENIED},
		{sandbox.ErrSandboxUnavailable, nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_DENIED},
		{&netguard.BlockedError{Reason: "loopback"}, nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_DENIED},
		{fmt.Errorf("%w after 1s", sandbox.ErrTimeout), nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_TIMEOUT},
		{context.DeadlineExceeded, nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_TIMEOUT},
		{errors.New("disk on fire"), nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_FAILED},
	}
	for _, tt := range tests {
		if got := tools.ErrorKind(tt.err); got != tt.want {
			t.Errorf("ErrorKind(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}

func TestSessionObjectPrefix(t *testing.T) {
	if got := tools.SessionObjectPrefix(tools.OutputPrefix, "telegram:42/../x"); got != "tool-output/telegram=3A42=2F=2E=2E=2Fx/" {
		t.Errorf("prefix %q", got)
	}
}
