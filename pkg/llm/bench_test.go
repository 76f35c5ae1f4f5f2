package llm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// BenchmarkChat is one call the size of a fleet turn's (a 6 KB system
// prompt, a dozen tool schemas, a short history: about 12 KB of JSON)
// to a fake model on loopback that reads it lightly, as the bench's does.
func BenchmarkChat(b *testing.B) {
	srv := llmtest.NewServer(b, llmtest.WithLightRequests(), llmtest.WithMaxRecorded(0))
	srv.Handle(func(*llmtest.RecordedRequest) llmtest.Reply { return llmtest.Text("ok") })
	p, err := llm.New(llm.Config{Name: "custom", APIBase: srv.URL(), Model: "m"})
	if err != nil {
		b.Fatal(err)
	}
	req := llm.Request{Messages: []*nanofleetv1.ChatMessage{{Role: "system", Content: strings.Repeat("You are a helpful assistant. ", 230)}}}
	for i := range 4 {
		req.Messages = append(req.Messages,
			&nanofleetv1.ChatMessage{Role: "user", Content: fmt.Sprintf("message %d", i)},
			&nanofleetv1.ChatMessage{Role: "assistant", Content: "ok"})
	}
	req.Messages = append(req.Messages, &nanofleetv1.ChatMessage{Role: "user", Content: "message 4"})
	const schema = `{"type":"object","properties":{"path":{"type":"string","description":"The file path to read, relative to the workspace."},"offset":{"type":"integer","minimum":0},"limit":{"type":"integer","minimum":1,"maximum":2000}},"required":["path"]}`
	for i := range 12 {
		req.Tools = append(req.Tools, &nanofleetv1.ToolDefinition{Name: fmt.Sprintf("tool_%d", i), Description: "Read a file from the workspace and return its lines.", ParametersJson: schema})
	}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := p.Chat(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.Content != "ok" {
			b.Fatalf("content %q", resp.Content)
		}
	}
}
