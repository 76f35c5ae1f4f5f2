package mcp_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/nanofleet/nanofleet/services/tool-runner/mcp"
)

// A tools.mcpServers section as users copy it from Claude Desktop or
// Cursor; the transport follows from command or url.
func ExampleValidateServers() {
	var servers map[string]mcp.ServerConfig
	_ = json.Unmarshal([]byte(`{
		"everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "network": true},
		"legacy":     {"url": "https://mcp.example.com/sse", "headers": {"Authorization": "Bearer secret"}},
		"remote":     {"url": "https://mcp.example.com/mcp", "toolTimeout": 60, "enabledTools": ["search"]}
	}`), &servers)
	if err := mcp.ValidateServers(servers); err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		s := servers[name]
		fmt.Println(name, s.Transport(), s.Timeout())
	}
	// Output:
	// everything stdio 30s
	// legacy sse 30s
	// remote streamableHttp 1m0s
}
