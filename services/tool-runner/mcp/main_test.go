package mcp_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeEnv makes the test binary an MCP server (see fakeServer).
const fakeEnv = "NANOFLEET_FAKE_MCP"

// fakeBinary is a copy of the test binary that the sandbox's unprivileged
// user can run (go test's build directory is private).
var fakeBinary string

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) == "1" {
		fakeServer(os.Stdin, os.Stdout)
		os.Exit(0)
	}
	dir, err := copyTestBinary()
	if err != nil {
		fmt.Fprintln(os.Stderr, "copy test binary:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func copyTestBinary() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "nanofleet-mcp-fake-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return dir, err
	}
	in, err := os.Open(self)
	if err != nil {
		return dir, err
	}
	defer in.Close()
	fakeBinary = filepath.Join(dir, "fake-mcp-server")
	out, err := os.OpenFile(fakeBinary, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		return dir, err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return dir, err
	}
	return dir, out.Close()
}

// fakeServer is a hand-written MCP server over newline-delimited JSON-RPC,
// so that it can misbehave in ways an SDK server would not: tools hang,
// return malformed results, print garbage on stdout, or exit.
//
// With FAKE_MCP_REQUIRE=<path> set it exits at once unless the file
// exists (a server that cannot start yet).
func fakeServer(in io.Reader, out io.Writer) {
	if p := os.Getenv("FAKE_MCP_REQUIRE"); p != "" {
		if _, err := os.Stat(p); err != nil {
			fmt.Fprintln(os.Stderr, "fake server: required file missing:", p)
			os.Exit(2)
		}
	}
	fmt.Fprintln(os.Stderr, "fake server starting")
	var mu sync.Mutex
	write := func(v any) {
		data, _ := json.Marshal(v)
		mu.Lock()
		defer mu.Unlock()
		out.Write(append(data, '\n'))
	}
	result := func(id json.RawMessage, r any) {
		write(map[string]any{"jsonrpc": "2.0", "id": id, "result": r})
	}
	text := func(s string) map[string]any {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}}
	}
	obj := func(props string, required ...string) json.RawMessage {
		req, _ := json.Marshal(required)
		if required == nil {
			req = []byte("[]")
		}
		return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `}`)
	}
	toolList := []map[string]any{
		{"name": "echo", "description": "Echo a message", "inputSchema": obj(`"message":{"type":"string"}`, "message")},
		{"name": "hang", "description": "Never answers", "inputSchema": obj(``)},
		{"name": "bad", "description": "Answers a malformed result", "inputSchema": obj(``)},
		{"name": "garbage", "description": "Prints garbage on stdout", "inputSchema": obj(``)},
		{"name": "die", "description": "Exits", "inputSchema": obj(``)},
		{"name": "fail", "description": "Reports an error", "inputSchema": obj(``)},
		{"name": "env", "description": "Environment and user", "inputSchema": obj(``), "annotations": map[string]any{"readOnlyHint": true}},
		{"name": "read", "description": "Reads a host file", "inputSchema": obj(`"path":{"type":"string"}`, "path")},
		{"name": "dotted.name", "description": "A name with a dot", "inputSchema": obj(``)},
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string         `json:"protocolVersion"`
				Name            string         `json:"name"`
				URI             string         `json:"uri"`
				Arguments       map[string]any `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || req.ID == nil {
			continue // notifications and responses
		}
		p := req.Params
		switch req.Method {
		case "initialize":
			v := p.ProtocolVersion
			switch v {
			case "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25":
			default:
				v = "2025-06-18"
			}
			result(req.ID, map[string]any{
				"protocolVersion": v,
				"capabilities":    map[string]any{"tools": map[string]any{}, "resources": map[string]any{}, "prompts": map[string]any{}},
				"serverInfo":      map[string]any{"name": "fake", "version": "1.0.0"},
			})
		case "ping":
			result(req.ID, map[string]any{})
		case "tools/list":
			result(req.ID, map[string]any{"tools": toolList})
		case "resources/list":
			result(req.ID, map[string]any{"resources": []any{map[string]any{"uri": "fake://greeting", "name": "greeting", "mimeType": "text/plain"}}})
		case "resources/templates/list":
			result(req.ID, map[string]any{"resourceTemplates": []any{map[string]any{"uriTemplate": "fake://items/{id}", "name": "item"}}})
		case "resources/read":
			result(req.ID, map[string]any{"contents": []any{map[string]any{"uri": p.URI, "mimeType": "text/plain", "text": "content of " + p.URI}}})
		case "prompts/list":
			result(req.ID, map[string]any{"prompts": []any{map[string]any{"name": "greet", "description": "Greet someone",
				"arguments": []any{map[string]any{"name": "who", "description": "Whom to greet", "required": true}}}}})
		case "prompts/get":
			who, _ := p.Arguments["who"].(string)
			result(req.ID, map[string]any{"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "Say hello to " + who}}}})
		case "tools/call":
			switch p.Name {
			case "echo":
				result(req.ID, text(fmt.Sprint("echo: ", p.Arguments["message"])))
			case "hang":
			case "bad":
				result(req.ID, map[string]any{"content": 5})
			case "garbage":
				mu.Lock()
				io.WriteString(out, "this is not JSON-RPC\n")
				mu.Unlock()
			case "die":
				os.Exit(3)
			case "fail":
				r := text("it broke")
				r["isError"] = true
				result(req.ID, r)
			case "env":
				env := os.Environ()
				result(req.ID, text(fmt.Sprintf("uid=%d pid=%d env=%s", os.Getuid(), os.Getpid(), strings.Join(env, " "))))
			case "read":
				path, _ := p.Arguments["path"].(string)
				data, err := os.ReadFile(path)
				if err != nil {
					result(req.ID, text("cannot read: "+err.Error()))
				} else {
					result(req.ID, text("read: "+string(data)))
				}
			case "dotted.name":
				result(req.ID, text("dotted"))
			default:
				write(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32602, "message": "unknown tool " + p.Name}})
			}
		default:
			write(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found: " + req.Method}})
		}
	}
}
