package fleet_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox/sandboxtest"
)

// readmeMCPExample is the tools.mcpServers example of the README, as a
// user copies it.
func readmeMCPExample(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "<!-- mcp-example:start -->")
	block, _, ok2 := strings.Cut(block, "<!-- mcp-example:end -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no mcp-example block")
	}
	block = strings.TrimSpace(block)
	block = strings.TrimSuffix(strings.TrimPrefix(block, "```json"), "```")
	var v map[string]any
	if err := json.Unmarshal([]byte(block), &v); err != nil {
		t.Fatalf("README's MCP example is not JSON: %v", err)
	}
	return v
}

// TestMCPAsTheReadmeShows: the README's tools.mcpServers block, with the
// real server-memory and server-filesystem from npm, in the sandbox
// (bubblewrap where it runs): the model creates a memory entity, reads
// the graph back and reads a workspace file through the filesystem
// server; the graph lands in the server's private directory.
func TestMCPAsTheReadmeShows(t *testing.T) {
	for _, bin := range []string{"mcp-server-memory", "mcp-server-filesystem", "node"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("skipping: %s is not installed (%v); npm install -g @modelcontextprotocol/server-memory @modelcontextprotocol/server-filesystem (.ci/npm-packages)", bin, err)
		}
	}
	mode := mcpMemorySandbox(t)
	t.Logf("sandbox: %s", mode)
	home := sandboxtest.BaseDir(t) // the sandbox user passes through HOME
	ws := filepath.Join(home, ".nanofleet", "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("the launch code is tea"), 0o644); err != nil {
		t.Fatal(err)
	}
	example := readmeMCPExample(t)
	tools := example["tools"].(map[string]any)
	tools["exec"] = map[string]any{"sandbox": mode}
	llm := llmtest.NewServer(t)
	cfg := testConfig(t, llm.URL(), map[string]any{"tools": tools})
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := config.Defaults()
	if err := config.Parse(file, data, func(k string) string { return map[string]string{"HOME": home}[k] }); err != nil {
		t.Fatalf("the README's example does not load: %v", err)
	}
	tf := startFleetFile(t, llm, file, filepath.Join(home, ".nanofleet", "data"), ws, 1, 90*time.Second)

	llm.Enqueue(
		llmtest.ToolCalls(llmtest.Call("mcp_memory_create_entities", `{"entities":[{"name":"Ada","entityType":"person","observations":["drinks tea"]}]}`)),
		llmtest.ToolCalls(
			llmtest.Call("mcp_memory_read_graph", `{}`),
			llmtest.Call("mcp_files_read_text_file", `{"path":"`+filepath.Join(ws, "notes.txt")+`"}`)),
		llmtest.Text("done"),
	)
	if out := ask(t, tf, "mcp", "remember Ada, then read my notes"); out.GetContent() != "done" {
		t.Fatalf("reply = %v", out)
	}
	reqs := llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	var results []string
	for _, m := range reqs[2].Messages {
		if m.Role == "tool" {
			results = append(results, llmtest.MessageText(m))
		}
	}
	all := strings.Join(results, "\n")
	for _, want := range []string{"drinks tea", "the launch code is tea"} {
		if !strings.Contains(all, want) {
			t.Errorf("tool results lack %q:\n%s", want, all)
		}
	}
	graph, err := os.ReadFile(filepath.Join(home, ".nanofleet", "workspace-mcp", "memory", "memory.jsonl"))
	if err != nil || !strings.Contains(string(graph), "Ada") {
		t.Errorf("server-memory's graph in its private directory: %q, %v", graph, err)
	}
}
