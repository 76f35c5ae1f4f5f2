package jsonrepair_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/nanofleet/nanofleet/services/memory-consolidator/jsonrepair"
)

func TestObject(t *testing.T) {
	want := map[string]any{"history_entry": "Ada moved.", "memory_update": "# Facts\n- Ada lives in Porto"}
	tests := []struct {
		name string
		in   string
		want map[string]any
	}{
		{"valid", `{"history_entry": "Ada moved.", "memory_update": "# Facts\n- Ada lives in Porto"}`, want},
		{"fenced", "```json\n{\"history_entry\": \"Ada moved.\", \"memory_update\": \"# Facts\\n- Ada lives in Porto\"}\n```", want},
		{"prose around", "Here you go:\n{\"history_entry\": \"Ada moved.\", \"memory_update\": \"# Facts\\n- Ada lives in Porto\"}\nHope this helps!", want},
		{"trailing comma", `{"history_entry": "Ada moved.", "memory_update": "# Facts\n- Ada lives in Porto",}`, want},
		{"raw newline in string", "{\"history_entry\": \"Ada moved.\", \"memory_update\": \"# Facts\n- Ada lives in Porto\"}", want},
		{"single quotes", `{'history_entry': 'Ada moved.', 'memory_update': '# Facts\n- Ada lives in Porto'}`, want},
		{"unquoted keys", `{history_entry: "Ada moved.", memory_update: "# Facts\n- Ada lives in Porto"}`, want},
		{"think block", "<think>{\"no\": 1}</think>{\"history_entry\": \"Ada moved.\", \"memory_update\": \"# Facts\\n- Ada lives in Porto\"}", want},
		{"cut off", `{"history_entry": "Ada moved.", "memory_update": "# Facts\n- Ada lives in Porto`, want},
		{"stray quotes", `{"history_entry": "Ada said "hi" and left", "n": 1}`, map[string]any{"history_entry": `Ada said "hi" and left`, "n": float64(1)}},
		{"python literals", `{"a": True, "b": None, "c": [1, 2,]}`, map[string]any{"a": true, "b": nil, "c": []any{float64(1), float64(2)}}},
		{"bad escape", `{"path": "C:\dir"}`, map[string]any{"path": `C:\dir`}},
		{"dangling key", `{"a": "x", "b":`, map[string]any{"a": "x", "b": nil}},
	}
	for _, tt := range tests {
		got, err := jsonrepair.Object(tt.in)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %#v, want %#v", tt.name, got, tt.want)
		}
	}
}

func TestObjectFails(t *testing.T) {
	for _, in := range []string{"", "I could not do that.", "[1, 2]"} {
		if _, err := jsonrepair.Object(in); err == nil {
			t.Errorf("Object(%q) succeeded", in)
		} else if in != "[1, 2]" && !errors.Is(err, jsonrepair.ErrNoObject) {
			t.Errorf("Object(%q) = %v, want ErrNoObject", in, err)
		}
	}
}
