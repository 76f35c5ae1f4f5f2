package llm

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// The body with the tools added must say what go-openai's own encoding of
// the request with its tools says.
func TestAddedToolsMatchGoOpenAI(t *testing.T) {
	t.Parallel()
	defs := []*nanofleetv1.ToolDefinition{
		{Name: "write_file", Description: "Write <a> file & more", ParametersJson: `{ "type": "object", "properties": {"path": {"type": "string"}} }`},
		{Name: "exec", Description: "run"},
		{Name: "mcp_x_y", Description: "an MCP tool", ParametersJson: `{"type":"object"}`},
	}
	var c toolCache
	for round := range 2 { // the second round comes from the cache
		set, err := c.convert(defs)
		if err != nil {
			t.Fatalf("round %d: convert: %v", round, err)
		}
		creq := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}, Tools: set.list}
		want, err := json.Marshal(creq)
		if err != nil {
			t.Fatal(err)
		}
		creq.Tools = nil
		bare, err := json.Marshal(creq)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/v1/chat/completions", strings.NewReader(string(bare)))
		if err != nil {
			t.Fatal(err)
		}
		if err := addTools(req, set.encoded); err != nil {
			t.Fatalf("round %d: addTools: %v", round, err)
		}
		got, err := io.ReadAll(req.Body)
		if err != nil {
			t.Fatal(err)
		}
		if req.ContentLength != int64(len(got)) {
			t.Errorf("round %d: content length %d, body %d bytes", round, req.ContentLength, len(got))
		}
		var gotV, wantV any
		if err := json.Unmarshal(got, &gotV); err != nil {
			t.Fatalf("round %d: body is not JSON: %v\n%s", round, err, got)
		}
		if err := json.Unmarshal(want, &wantV); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotV, wantV) {
			t.Errorf("round %d: body\n%s\nwant the same as\n%s", round, got, want)
		}
		again, err := req.GetBody()
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(again); string(b) != string(got) {
			t.Errorf("round %d: GetBody gives %s, want %s", round, b, got)
		}
	}
}

func TestToolCacheKeysOnContent(t *testing.T) {
	t.Parallel()
	var c toolCache
	def := &nanofleetv1.ToolDefinition{Name: "t", Description: "old", ParametersJson: `{"type":"object"}`}
	first, err := c.convert([]*nanofleetv1.ToolDefinition{def})
	if err != nil {
		t.Fatal(err)
	}
	def.Description = "new"
	second, err := c.convert([]*nanofleetv1.ToolDefinition{def})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(first.encoded), `"old"`) || !strings.Contains(string(second.encoded), `"new"`) {
		t.Errorf("encodings %s then %s: want the description each had", first.encoded, second.encoded)
	}
}

func TestAddToolsRefusesWhatIsNoObject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		want       string // the body after, or "" for errBodyNotObject
	}{
		{"object", `{"model":"m"}`, `{"model":"m","tools":[]}`},
		{"empty object", `{}`, `{"tools":[]}`},
		{"trailing newline", "{\"model\":\"m\"}\n", `{"model":"m","tools":[]}`},
		{"array", `[1]`, ""},
		{"empty", ``, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			err = addTools(req, []byte(`[]`))
			if tc.want == "" {
				if !errors.Is(err, errBodyNotObject) {
					t.Fatalf("err %v, want errBodyNotObject", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("addTools: %v", err)
			}
			if got, _ := io.ReadAll(req.Body); string(got) != tc.want {
				t.Errorf("body %s, want %s", got, tc.want)
			}
		})
	}
}

// The same definitions, unchanged, get the set made for the last call;
// any change, a field set in place included, gets a set of its own.
func TestToolCacheReusesTheLastSet(t *testing.T) {
	t.Parallel()
	a := &nanofleetv1.ToolDefinition{Name: "write_file", Description: "write", ParametersJson: `{"type":"object"}`}
	b := &nanofleetv1.ToolDefinition{Name: "exec", Description: "run"}
	defs := []*nanofleetv1.ToolDefinition{a, b}
	var c toolCache
	first, err := c.convert(defs)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func() []*nanofleetv1.ToolDefinition
		reused bool
		want   string // in the encoded array
	}{
		{"same slice", func() []*nanofleetv1.ToolDefinition { return defs }, true, `"write"`},
		{"same definitions, another slice", func() []*nanofleetv1.ToolDefinition { return []*nanofleetv1.ToolDefinition{a, b} }, true, `"write"`},
		{"other order", func() []*nanofleetv1.ToolDefinition { return []*nanofleetv1.ToolDefinition{b, a} }, false, `"write"`},
		{"field set in place", func() []*nanofleetv1.ToolDefinition { a.Description = "write it"; return defs }, false, `"write it"`},
		{"one fewer", func() []*nanofleetv1.ToolDefinition { return defs[:1] }, false, `"write it"`},
	}
	prev := first
	for _, tc := range tests {
		set, err := c.convert(tc.change())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if reused := &set.encoded[0] == &prev.encoded[0]; reused != tc.reused {
			t.Errorf("%s: reused the last set = %v, want %v", tc.name, reused, tc.reused)
		}
		if !strings.Contains(string(set.encoded), tc.want) {
			t.Errorf("%s: encoded %s, want %s in it", tc.name, set.encoded, tc.want)
		}
		prev = set
	}
}
