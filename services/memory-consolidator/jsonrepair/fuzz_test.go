package jsonrepair_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/nanofleet/nanofleet/services/memory-consolidator/jsonrepair"
)

// FuzzObject: whatever a model writes, Object does not panic, what it
// returns encodes as JSON, and a text that already is a JSON object is
// read exactly as encoding/json reads it.
func FuzzObject(f *testing.F) {
	for _, seed := range []string{
		`{"history_entry": "Ada moved.", "memory_update": "# Facts\n- Ada lives in Porto"}`,
		"```json\n{\"a\": 1}\n```",
		`{'a': 'b', c: True, "d": [1, 2,],}`,
		`{"a": "x", "b":`,
		"<think>{\"no\": 1}</think>{\"a\": \"b\"}",
		`{"path": "C:\dir", "q": "say "hi""}`,
		`[]`, `"just a string"`, `{{{{`, "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		obj, err := jsonrepair.Object(text)
		if err != nil {
			return
		}
		if _, err := json.Marshal(obj); err != nil {
			t.Fatalf("Object(%q) returned a value that does not encode: %v", text, err)
		}
		var want map[string]any
		if json.Unmarshal([]byte(text), &want) == nil && want != nil && !reflect.DeepEqual(obj, want) {
			t.Fatalf("Object(%q) = %v, encoding/json reads %v", text, obj, want)
		}
	})
}
