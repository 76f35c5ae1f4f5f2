package toolschema_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/toolschema"
)

var execSchema = toolschema.Object(map[string]any{
	"command":     map[string]any{"type": "string", "minLength": 1},
	"working_dir": map[string]any{"type": "string"},
	"timeout":     map[string]any{"type": "integer", "minimum": 1, "maximum": 600, "default": 60},
	"background":  map[string]any{"type": "boolean"},
	"mode":        map[string]any{"type": "string", "enum": []any{"files", "content", "count"}, "default": "files"},
	"ratio":       map[string]any{"type": "number"},
	"tags":        map[string]any{"type": "array", "items": map[string]any{"type": "integer"}},
	"edits": map[string]any{"type": "array", "items": map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"path": map[string]any{"type": "string"}, "n": map[string]any{"type": "integer"}},
		"required":             []any{"path"},
		"additionalProperties": false,
	}},
	"label": map[string]any{"type": []any{"string", "null"}},
}, "command")

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want map[string]any
	}{
		{"object", `{"command":"ls"}`, map[string]any{"command": "ls", "timeout": int64(60), "mode": "files"}},
		{"json string holding the object", `"{\"command\":\"ls\",\"timeout\":5}"`, map[string]any{"command": "ls", "timeout": int64(5), "mode": "files"}},
		{"string to integer", `{"command":"ls","timeout":"60"}`, map[string]any{"command": "ls", "timeout": int64(60), "mode": "files"}},
		{"integral float to integer", `{"command":"ls","timeout":30.0}`, map[string]any{"command": "ls", "timeout": int64(30), "mode": "files"}},
		{"string to bool", `{"command":"ls","background":"true"}`, map[string]any{"command": "ls", "timeout": int64(60), "mode": "files", "background": true}},
		{"yes/no to bool", `{"command":"ls","background":"No"}`, map[string]any{"command": "ls", "timeout": int64(60), "mode": "files", "background": false}},
		{"number to string", `{"command":42}`, map[string]any{"command": "42", "timeout": int64(60), "mode": "files"}},
		{"string to number", `{"command":"x","ratio":" 0.5 "}`, map[string]any{"command": "x", "timeout": int64(60), "mode": "files", "ratio": 0.5}},
		{"array in a string", `{"command":"x","tags":"[1, \"2\"]"}`, map[string]any{"command": "x", "timeout": int64(60), "mode": "files", "tags": []any{int64(1), int64(2)}}},
		{"optional null dropped, default applies", `{"command":"x","timeout":null,"working_dir":null}`, map[string]any{"command": "x", "timeout": int64(60), "mode": "files"}},
		{"nullable kept", `{"command":"x","label":null}`, map[string]any{"command": "x", "timeout": int64(60), "mode": "files", "label": nil}},
		{"nested cast", `{"command":"x","edits":[{"path":"a","n":"3"}]}`, map[string]any{"command": "x", "timeout": int64(60), "mode": "files", "edits": []any{map[string]any{"path": "a", "n": int64(3)}}}},
	}
	s := toolschema.MustCompile(execSchema)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Parse(tt.raw)
			if err != nil {
				t.Fatalf("Parse(%s): %v", tt.raw, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%s)\n got %#v\nwant %#v", tt.raw, got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want []string // substrings of the message
		path string   // path of the first problem
	}{
		{"missing required", `{}`, []string{`missing required argument "command"`}, "command"},
		{"maximum", `{"command":"x","timeout":601}`, []string{`argument "timeout": must be <= 600`}, "timeout"},
		{"minimum via cast", `{"command":"x","timeout":"0"}`, []string{`argument "timeout": must be >= 1`}, "timeout"},
		{"not an integer", `{"command":"x","timeout":"soon"}`, []string{`argument "timeout": must be integer, got string`}, "timeout"},
		{"fraction is not an integer", `{"command":"x","timeout":1.5}`, []string{`argument "timeout": must be integer, got number`}, "timeout"},
		{"enum", `{"command":"x","mode":"all"}`, []string{`argument "mode": must be one of "files", "content", "count"`}, "mode"},
		{"unknown argument lists allowed ones", `{"command":"x","cmd":"y"}`, []string{`unknown argument "cmd"; allowed: background, command,`}, "cmd"},
		{"min length", `{"command":""}`, []string{`argument "command": must be at least 1 characters long`}, "command"},
		{"bad bool", `{"command":"x","background":"maybe"}`, []string{`argument "background": must be boolean, got string`}, "background"},
		{"nested required", `{"command":"x","edits":[{"n":1}]}`, []string{`missing required argument "edits[0].path"`}, "edits[0].path"},
		{"nested unknown", `{"command":"x","edits":[{"path":"a","x":1}]}`, []string{`unknown argument "edits[0].x"; allowed: n, path`}, "edits[0].x"},
		{"array item type", `{"command":"x","tags":[1,"two"]}`, []string{`argument "tags[1]": must be integer, got string`}, "tags[1]"},
		{"required null", `{"command":null}`, []string{`argument "command": must be string, got null`}, "command"},
		{"not json", `{"command":`, []string{"arguments are not valid JSON"}, ""},
		{"array", `[1,2]`, []string{"arguments must be a JSON object, got array"}, ""},
		{"string without object", `"ls -la"`, []string{"does not hold a JSON object"}, ""},
		{"trailing data", `{"command":"x"} {}`, []string{"not valid JSON"}, ""},
		{"several problems", `{"timeout":1000,"mode":1}`, []string{`missing required argument "command"`, `argument "timeout": must be <= 600`, `argument "mode"`}, "command"},
	}
	s := toolschema.MustCompile(execSchema)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Parse(tt.raw)
			if err == nil {
				t.Fatalf("Parse(%s) succeeded", tt.raw)
			}
			if !errors.Is(err, toolschema.ErrInvalidArguments) {
				t.Errorf("error %v does not match ErrInvalidArguments", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			var ae *toolschema.ArgumentError
			if !errors.As(err, &ae) {
				t.Fatalf("error %T is not an *ArgumentError", err)
			}
			if ae.Problems[0].Path != tt.path {
				t.Errorf("first problem path = %q, want %q (%v)", ae.Problems[0].Path, tt.path, ae.Problems)
			}
		})
	}
}

func TestParseEmptyArguments(t *testing.T) {
	for _, raw := range []string{"", "  ", "null", `""`, `{}`} {
		got, err := toolschema.Parse(json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","default":3}}}`), raw)
		if err != nil {
			t.Fatalf("Parse(%q): %v", raw, err)
		}
		if got["n"] != int64(3) {
			t.Errorf("Parse(%q) = %v, want default n=3", raw, got)
		}
	}
}

func TestCompileRejectsBadSchema(t *testing.T) {
	for _, s := range []string{`[]`, `{"type":"objekt"}`, `{"type":`, `{"minimum":"x"}`} {
		if _, err := toolschema.Compile(json.RawMessage(s)); !errors.Is(err, toolschema.ErrInvalidSchema) {
			t.Errorf("Compile(%s) = %v, want ErrInvalidSchema", s, err)
		}
	}
}

func TestDecode(t *testing.T) {
	args, err := toolschema.Parse(execSchema, `{"command":"ls","timeout":"9","background":"true"}`)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Command    string `json:"command"`
		Timeout    int    `json:"timeout"`
		Background bool   `json:"background"`
	}
	if err := toolschema.Decode(args, &p); err != nil {
		t.Fatal(err)
	}
	if p.Command != "ls" || p.Timeout != 9 || !p.Background {
		t.Errorf("decoded %+v", p)
	}
}
