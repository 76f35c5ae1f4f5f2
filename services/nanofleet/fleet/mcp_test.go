package fleet_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/services/tool-runner/mcp/mcptest"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox/sandboxtest"
)

// mcpMemorySandbox is the sandbox for the npm servers under /usr.
func mcpMemorySandbox(t *testing.T) sandbox.Mode {
	t.Helper()
	bin, err := exec.LookPath("mcp-server-memory")
	if err != nil {
		t.Skip(err)
	}
	return mcptest.Sandbox(t, bin)
}

// TestMCPToolsInAFleetTurn: server-everything over stdio (in the sandbox)
// and over streamable HTTP; the model sees their tools, calls them, and
// gets their results, a resource, a prompt and a time-out.
func TestMCPToolsInAFleetTurn(t *testing.T) {
	bin, mode := mcptest.Everything(t)
	url, _ := mcptest.HTTP(t, bin)
	llm := llmtest.NewServer(t)

	base := sandboxtest.BaseDir(t) // the sandbox user reaches the MCP dirs
	cfg := testConfig(t, llm.URL(), map[string]any{"tools": map[string]any{
		"exec": map[string]any{"sandbox": mode},
		"mcpServers": map[string]any{
			"everything": map[string]any{"command": "mcp-server-everything", "toolTimeout": 2},
			"remote":     map[string]any{"url": url, "allowCIDRs": []string{"127.0.0.1/32"}, "enabledTools": []string{"get-sum"}},
		},
	}})
	tf := startFleetFile(t, llm, loadConfig(t, cfg), filepath.Join(base, "data"), filepath.Join(base, "ws"), 1, 60*time.Second)

	llm.Enqueue(
		llmtest.ToolCalls(llmtest.Call("mcp_everything_echo", `{"message":"hello over stdio"}`)),
		llmtest.ToolCalls(llmtest.Call("mcp_remote_get-sum", `{"a":20,"b":22}`)),
		llmtest.ToolCalls(
			llmtest.Call("mcp_everything_resource_architecture_md", `{}`),
			llmtest.Call("mcp_everything_prompt_args-prompt", `{"city":"Lisbon"}`)),
		llmtest.ToolCalls(llmtest.Call("mcp_everything_trigger-long-running-operation", `{"duration":30,"steps":3}`)),
		llmtest.Text("All MCP tools answered."),
	)
	out := ask(t, tf, "mcp", "use the MCP tools")
	if out.GetContent() != "All MCP tools answered." {
		t.Fatalf("reply = %v", out)
	}
	reqs := llm.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d model requests, want 5", len(reqs))
	}
	names := reqs[0].ToolNames()
	for _, want := range []string{"mcp_everything_echo", "mcp_everything_resource_architecture_md", "mcp_everything_prompt_args-prompt", "mcp_remote_get-sum", "read_file"} {
		if !slices.Contains(names, want) {
			t.Fatalf("the model was not offered %s: %v", want, names)
		}
	}
	if slices.Contains(names, "mcp_remote_echo") {
		t.Errorf("enabledTools of remote ignored: %v", names)
	}
	toolText := func(i int) string { return llmtest.MessageText(reqs[i].LastMessage()) }
	if got := toolText(1); !strings.Contains(got, "Echo: hello over stdio") {
		t.Errorf("echo result given to the model: %q", got)
	}
	if got := toolText(2); !strings.Contains(got, "The sum of 20 and 22 is 42.") {
		t.Errorf("get-sum (streamable HTTP) result given to the model: %q", got)
	}
	var sawResource, sawPrompt bool
	for _, m := range reqs[3].Messages {
		if m.Role != "tool" {
			continue
		}
		text := llmtest.MessageText(m)
		sawResource = sawResource || strings.Contains(text, "Architecture")
		sawPrompt = sawPrompt || strings.Contains(text, "Lisbon")
	}
	if !sawResource || !sawPrompt {
		t.Errorf("resource read %v, prompt got %v: %v", sawResource, sawPrompt, reqs[3].Messages)
	}
	if got := toolText(4); !strings.Contains(got, "did not finish within 2s") {
		t.Errorf("time-out given to the model: %q", got)
	}
}
