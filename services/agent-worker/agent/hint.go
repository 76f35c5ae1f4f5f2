package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Hint describes a tool call in a few words for the user, the way nanobot
// shows them: "$ ls -la", "read src/main.go".
func Hint(c *nanofleetv1.ToolCall) string {
	var args map[string]any
	_ = json.Unmarshal([]byte(c.GetArgumentsJson()), &args)
	str := func(k string) string { s, _ := args[k].(string); return clip(s, 80) }
	switch c.GetName() {
	case "exec":
		return "$ " + str("command")
	case "read_file":
		return "read " + str("path")
	case "write_file":
		return "write " + str("path")
	case "edit_file":
		return "edit " + str("path")
	case "list_dir":
		return "ls " + str("path")
	case "glob":
		return "glob " + str("pattern")
	case "grep":
		return "grep " + str("pattern")
	case "web_fetch":
		return "fetch " + str("url")
	case "web_search":
		return "search " + str("query")
	}
	return fmt.Sprintf("%s(%s)", c.GetName(), clip(c.GetArgumentsJson(), 60))
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
