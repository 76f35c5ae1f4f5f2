// Package forcedtool asks a model for its answer as one call of a given
// tool, forced by tool_choice, as the consolidator and Dream do: the
// call's arguments are checked against the tool's JSON Schema instead of
// parsed out of free text. A model that answers in text anyway (some
// OpenAI-compatible servers ignore tool_choice) is kept as text, for the
// caller to read as the JSON object its prompt describes.
package forcedtool

import (
	"context"
	"fmt"

	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/jsonrepair"
)

// Answer is a model's answer to a forced tool call.
type Answer struct {
	// Tool is the name of the tool that was forced.
	Tool string
	// Called reports whether the model called the tool; Arguments are
	// then the call's arguments, as the model sent them.
	Called    bool
	Arguments string
	// Text is the answer of a model that did not call the tool.
	Text string
	// Usage is what the call cost, also when the answer is unusable.
	Usage llm.Usage
}

// Ask sends req with tool as its only tool, forced by tool_choice (req's
// own Tools and ToolChoice are replaced), and returns the answer. Only the
// model's failure is an error; what the answer holds is the caller's to
// judge.
func Ask(ctx context.Context, model llm.Client, tool toolschema.Tool, req llm.Request) (Answer, error) {
	req.Tools = []*nanofleetv1.ToolDefinition{tool.Definition()}
	req.ToolChoice = tool.Name
	resp, err := model.Chat(ctx, req)
	if err != nil {
		return Answer{}, err
	}
	a := Answer{Tool: tool.Name, Usage: resp.Usage}
	for _, call := range resp.ToolCalls {
		if call.GetName() == tool.Name {
			a.Called, a.Arguments = true, call.GetArgumentsJson()
			return a, nil
		}
	}
	a.Text = resp.Content
	return a, nil
}

// Object reads the answer as the tool's arguments object: a call's
// arguments parsed and validated by schema (the tool's compiled
// parameters), or else the JSON object of the text answer, repaired where
// it can be and not validated (the text fallback is as lenient as
// answers were before tools were forced). Errors match [ErrBadAnswer].
func (a Answer) Object(schema *toolschema.Schema) (map[string]any, error) {
	if a.Called {
		obj, err := schema.Parse(a.Arguments)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadAnswer, a.Tool, err)
		}
		return obj, nil
	}
	obj, err := jsonrepair.Object(a.Text)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadAnswer, err)
	}
	return obj, nil
}
