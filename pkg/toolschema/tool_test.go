package toolschema_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"

	"github.com/nanofleet/nanofleet/pkg/toolschema"
)

func TestSortAndRoundTrip(t *testing.T) {
	tools := []toolschema.Tool{
		{Name: "write_file", Exclusive: true},
		{Name: "exec", Exclusive: true},
		{Name: "read_file", ReadOnly: true, Parameters: toolschema.Object(map[string]any{"path": map[string]any{"type": "string"}}, "path")},
	}
	toolschema.SortTools(tools)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	if fmt.Sprint(names) != "[exec read_file write_file]" {
		t.Errorf("sorted = %v", names)
	}
	defs := []*nanofleetv1.ToolDefinition{tools[2].Definition(), tools[0].Definition(), tools[1].Definition()}
	toolschema.SortDefinitions(defs)
	if defs[0].GetName() != "exec" || defs[2].GetName() != "write_file" {
		t.Errorf("sorted definitions: %v", defs)
	}
	back := toolschema.FromDefinition(defs[1])
	if back.Name != "read_file" || !back.ReadOnly || string(back.Parameters) != string(tools[1].Parameters) {
		t.Errorf("round trip = %+v", back)
	}
}

func TestObjectIsDeterministic(t *testing.T) {
	props := map[string]any{"b": map[string]any{"type": "string"}, "a": map[string]any{"type": "integer"}}
	first := string(toolschema.Object(props, "a"))
	for range 20 {
		if got := string(toolschema.Object(props, "a")); got != first {
			t.Fatalf("Object changed between calls:\n%s\n%s", first, got)
		}
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(first), &m); err != nil || m["additionalProperties"] != false {
		t.Errorf("Object = %s (%v)", first, err)
	}
}

func ExampleSchema_Parse() {
	s := toolschema.MustCompile(toolschema.Object(map[string]any{
		"path":    map[string]any{"type": "string"},
		"timeout": map[string]any{"type": "integer", "maximum": 600, "default": 60},
	}, "path"))

	args, _ := s.Parse(`{"path": "notes.md", "timeout": "30"}`)
	fmt.Println(args["path"], args["timeout"])

	_, err := s.Parse(`{"timeout": 900}`)
	fmt.Println(err)
	// Output:
	// notes.md 30
	// missing required argument "path"; argument "timeout": must be <= 600
}

func TestSortDefinitionsPutsMCPToolsLast(t *testing.T) {
	defs := []*nanofleetv1.ToolDefinition{{Name: "mcp_a_x"}, {Name: "write_file"}, {Name: "exec"}, {Name: "mcp_0_y"}}
	toolschema.SortDefinitions(defs)
	var got []string
	for _, d := range defs {
		got = append(got, d.GetName())
	}
	if want := "exec,write_file,mcp_0_y,mcp_a_x"; strings.Join(got, ",") != want {
		t.Errorf("order = %v, want %s", got, want)
	}
}
