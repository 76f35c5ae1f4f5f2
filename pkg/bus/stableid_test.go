package bus_test

import (
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

// TestStableID: ids already stored (job ids, subagent ids) keep their
// value; parts are separated, so ("a","b") and ("ab") differ.
func TestStableID(t *testing.T) {
	cases := []struct {
		parts []string
		want  string
	}{
		{[]string{"a", "b"}, "8fb20ef6"},
		{[]string{"ab"}, "969caaeb"},
		{nil, "e3b0c442"},
	}
	for _, c := range cases {
		if got := bus.StableID(c.parts...); got != c.want {
			t.Errorf("StableID(%q) = %s, want %s", c.parts, got, c.want)
		}
	}
}
