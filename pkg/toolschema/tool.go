package toolschema

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Tool describes one tool.
type Tool struct {
	// Name as the model calls it, e.g. "read_file".
	Name string
	// Description tells the model what the tool does and when to use it.
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
	// ReadOnly tools change nothing; they may run concurrently and a call
	// interrupted by a runner's death may be retried.
	ReadOnly bool
	// Exclusive tools run alone, never next to another tool call.
	Exclusive bool
}

// Definition returns t as the wire type the runners' catalog carries.
func (t Tool) Definition() *nanofleetv1.ToolDefinition {
	return &nanofleetv1.ToolDefinition{
		Name:           t.Name,
		Description:    t.Description,
		ParametersJson: string(t.Parameters),
		ReadOnly:       t.ReadOnly,
		Exclusive:      t.Exclusive,
	}
}

// FromDefinition is the inverse of [Tool.Definition].
func FromDefinition(d *nanofleetv1.ToolDefinition) Tool {
	return Tool{
		Name:        d.GetName(),
		Description: d.GetDescription(),
		Parameters:  json.RawMessage(d.GetParametersJson()),
		ReadOnly:    d.GetReadOnly(),
		Exclusive:   d.GetExclusive(),
	}
}

// MCPPrefix begins the names of tools that MCP servers provide.
const MCPPrefix = "mcp_"

// Compare orders tool names as they are sent to a provider: built-in tools
// by name, then MCP tools by name. A fixed order keeps the prompt prefix
// the same bytes from call to call, so provider prompt caches hit.
func Compare(a, b string) int {
	am, bm := strings.HasPrefix(a, MCPPrefix), strings.HasPrefix(b, MCPPrefix)
	if am != bm {
		if am {
			return 1
		}
		return -1
	}
	return cmp.Compare(a, b)
}

// SortTools sorts tools in place by [Compare].
func SortTools(tools []Tool) {
	slices.SortStableFunc(tools, func(a, b Tool) int { return Compare(a.Name, b.Name) })
}

// SortDefinitions sorts definitions in place by [Compare].
func SortDefinitions(defs []*nanofleetv1.ToolDefinition) {
	slices.SortStableFunc(defs, func(a, b *nanofleetv1.ToolDefinition) int {
		return Compare(a.GetName(), b.GetName())
	})
}

// Object builds the schema of an arguments object from its properties
// (each a JSON Schema as a map) and the names of the required ones. The
// output is deterministic: encoding/json writes map keys sorted.
func Object(properties map[string]any, required ...string) json.RawMessage {
	s := map[string]any{
		"type":                 "object",
		"properties":           properties,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	data, err := json.Marshal(s)
	if err != nil {
		// Only values that cannot be JSON (channels, funcs) get here: a
		// programming error in a tool's definition.
		panic("toolschema.Object: " + err.Error())
	}
	return data
}
