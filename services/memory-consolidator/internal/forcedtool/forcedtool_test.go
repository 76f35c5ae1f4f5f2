package forcedtool_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/forcedtool"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/memtest"
)

var note = toolschema.Tool{
	Name:        "save_note",
	Description: "Save a note.",
	Parameters: toolschema.Object(map[string]any{
		"text": map[string]any{"type": "string", "minLength": 1},
	}, "text"),
}

// TestAsk: the request offers the tool alone and forces it; the answer
// is the call's arguments checked by the schema, or a text answer's
// repaired JSON object.
func TestAsk(t *testing.T) {
	tests := []struct {
		name    string
		reply   llmtest.Reply
		called  bool
		text    string // obj["text"]; "" for an error
		wantErr string
	}{
		{"call", llmtest.ToolCalls(llmtest.Call("save_note", `{"text": "hi"}`)), true, "hi", ""},
		{"call of another tool", llmtest.ToolCalls(llmtest.Call("other", `{"text": "hi"}`)), false, "", "no JSON object"},
		{"invalid call", llmtest.ToolCalls(llmtest.Call("save_note", `{"text": ""}`)), true, "", `save_note: argument "text"`},
		{"text", llmtest.Text("```json\n{\"text\": \"hi\",}\n```"), false, "hi", ""},
		{"prose", llmtest.Text("Sorry."), false, "", "no JSON object"},
	}
	srv := llmtest.NewServer(t)
	model := memtest.Model(t, srv)
	schema := toolschema.MustCompile(note.Parameters)
	for _, tt := range tests {
		srv.Enqueue(tt.reply.WithUsage(10, 5))
		a, err := forcedtool.Ask(t.Context(), model, note, llm.Request{
			Messages:   []*nanofleetv1.ChatMessage{{Role: "user", Content: "note hi"}},
			Tools:      []*nanofleetv1.ToolDefinition{{Name: "other"}},
			ToolChoice: "required",
		})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		req, _ := srv.LastRequest()
		choice, _ := json.Marshal(req.ToolChoice)
		if string(choice) != `{"function":{"name":"save_note"},"type":"function"}` || len(req.Tools) != 1 || req.Tools[0].Function.Name != "save_note" {
			t.Errorf("%s: tool_choice %s with tools %v, want save_note forced", tt.name, choice, req.ToolNames())
		}
		if a.Called != tt.called || a.Usage.PromptTokens != 10 {
			t.Errorf("%s: answer %+v", tt.name, a)
		}
		obj, err := a.Object(schema)
		switch {
		case tt.wantErr != "":
			if !errors.Is(err, forcedtool.ErrBadAnswer) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: error %v, want ErrBadAnswer with %q", tt.name, err, tt.wantErr)
			}
		case err != nil || obj["text"] != tt.text:
			t.Errorf("%s: object %v, %v; want text %q", tt.name, obj, err, tt.text)
		}
	}
}
