package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nanofleet/nanofleet/pkg/textcut"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// hints are the tools with a hint of their own: a prefix and the argument
// to show after it.
var hints = map[string]struct{ prefix, arg string }{
	"exec":       {"$ ", "command"},
	"read_file":  {"read ", "path"},
	"write_file": {"write ", "path"},
	"edit_file":  {"edit ", "path"},
	"list_dir":   {"ls ", "path"},
	"glob":       {"glob ", "pattern"},
	"grep":       {"grep ", "pattern"},
	"web_fetch":  {"fetch ", "url"},
	"web_search": {"search ", "query"},
}

// Hint describes a tool call in a few words for the user, the way nanobot
// shows them: "$ ls -la", "read src/main.go".
func Hint(c *nanofleetv1.ToolCall) string {
	h, ok := hints[c.GetName()]
	if !ok {
		return fmt.Sprintf("%s(%s)", c.GetName(), clip(c.GetArgumentsJson(), 60))
	}
	var args map[string]any
	_ = json.Unmarshal([]byte(c.GetArgumentsJson()), &args)
	s, _ := args[h.arg].(string)
	return h.prefix + clip(s, 80)
}

// clip puts s on one line of at most n bytes, cut on a character
// boundary: the hint goes out in an OutboundMessage, and proto.Marshal
// refuses a string ending in half a character.
func clip(s string, n int) string {
	return textcut.Clip(strings.ReplaceAll(s, "\n", " "), n)
}
