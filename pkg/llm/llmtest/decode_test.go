package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// benchRequest is shaped like a fleet turn's request: a long system
// prompt, a dozen tool schemas, a short history and the user's message
// (about 12 KB).
func benchRequest(b *testing.B) []byte {
	req := openai.ChatCompletionRequest{Model: "m", MaxCompletionTokens: 2048}
	req.Messages = append(req.Messages, openai.ChatCompletionMessage{Role: "system", Content: strings.Repeat("You are a helpful assistant. ", 230)})
	for i := range 4 {
		req.Messages = append(req.Messages,
			openai.ChatCompletionMessage{Role: "user", Content: fmt.Sprintf("message %d", i)},
			openai.ChatCompletionMessage{Role: "assistant", Content: "ok"})
	}
	req.Messages = append(req.Messages, openai.ChatCompletionMessage{Role: "user", Content: "message 4"})
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"The file path to read, relative to the workspace."},"offset":{"type":"integer","minimum":0},"limit":{"type":"integer","minimum":1,"maximum":2000}},"required":["path"]}`)
	for i := range 12 {
		req.Tools = append(req.Tools, openai.Tool{Type: "function", Function: &openai.FunctionDefinition{
			Name: fmt.Sprintf("tool_%d", i), Description: "Read a file from the workspace and return its lines.", Parameters: schema,
		}})
	}
	body, err := json.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkDecode compares the full decode with WithLightRequests' on a
// fleet-sized request.
func BenchmarkDecode(b *testing.B) {
	body := benchRequest(b)
	b.Run("full", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req openai.ChatCompletionRequest
			if err := json.NewDecoder(bytes.NewReader(body)).Decode(&req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("light", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req openai.ChatCompletionRequest
			if err := decodeLight(body, &req); err != nil {
				b.Fatal(err)
			}
			if len(req.Messages) != 1 || len(req.Tools) != 12 {
				b.Fatalf("%d messages, %d tools", len(req.Messages), len(req.Tools))
			}
		}
	})
}
