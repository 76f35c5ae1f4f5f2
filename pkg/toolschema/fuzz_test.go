package toolschema_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/toolschema"
)

// FuzzParse checks that Parse never panics, that every failure is an
// argument error, and that a success is a fixed point: parsing the
// re-encoded result gives the same arguments back.
func FuzzParse(f *testing.F) {
	seeds := []string{
		`{"command":"ls"}`,
		`"{\"command\":\"ls\",\"timeout\":\"60\"}"`,
		`{"command":"x","timeout":"0"}`,
		`{"command":1e400}`,
		`{"command":"x","timeout":6e1}`,
		`{"command":"x","ratio":"1e999"}`,
		`{"command":"x","tags":"[1,2,\"3\"]"}`,
		`{"command":"x","edits":"[{\"path\":\"a\",\"n\":\"1\"}]"}`,
		`{"command":"x","background":"YES","label":null}`,
		`{"command":true,"timeout":null}`,
		`[]`, `null`, `""`, `"\"\""`, `{`, `{"command":"x"}{}`, "\x00", `{"a":{"b":[[[[]]]]}}`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	s := toolschema.MustCompile(execSchema)
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := s.Parse(raw)
		if err != nil {
			if !errors.Is(err, toolschema.ErrInvalidArguments) {
				t.Fatalf("Parse(%q): error %v is not ErrInvalidArguments", raw, err)
			}
			if err.Error() == "" {
				t.Fatalf("Parse(%q): empty error message", raw)
			}
			return
		}
		data, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("Parse(%q) = %#v: not JSON-encodable: %v", raw, got, err)
		}
		again, err := s.Parse(string(data))
		if err != nil {
			t.Fatalf("re-parse of %s (from %q): %v", data, raw, err)
		}
		if !reflect.DeepEqual(got, again) {
			t.Fatalf("not a fixed point: %q -> %#v -> %#v", raw, got, again)
		}
	})
}

func TestParseHugeNumbersAreCheap(t *testing.T) {
	s := toolschema.MustCompile(execSchema)
	for _, raw := range []string{
		`{"command":"x","timeout":1e-9999999}`,
		`{"command":"x","timeout":"1e-9999999"}`,
		`{"command":"x","ratio":"1e9999999"}`,
		`{"command":"x","tags":"[1e-9999999]"}`,
		`{"command":1e9999999}`,
	} {
		if _, err := s.Parse(raw); err == nil {
			t.Errorf("Parse(%s) succeeded", raw)
		}
	}
}
