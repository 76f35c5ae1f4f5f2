package linematch_test

import (
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/services/tool-runner/tools/linematch"
)

func TestIndexAndCount(t *testing.T) {
	tests := []struct {
		lines, want string
		from        int
		index       int
		first, n    int
	}{
		{"a b c", "b c", 0, 1, 1, 1},
		{"a b c", "b c", 2, -1, 1, 1},
		{"a a a", "a a", 0, 0, 0, 2},
		{"a b a b a", "a b a", 1, 2, 0, 2},
		{"a b c", "c d", 0, -1, -1, 0},
		{"x a a b", "a a b", 0, 1, 1, 1},
		{"a", "", 0, 0, 0, 1},
	}
	for _, tt := range tests {
		lines, want := strings.Fields(tt.lines), strings.Fields(tt.want)
		if got := linematch.Index(lines, want, tt.from); got != tt.index {
			t.Errorf("Index(%q, %q, %d) = %d, want %d", tt.lines, tt.want, tt.from, got, tt.index)
		}
		if first, n := linematch.Count(lines, want); first != tt.first || n != tt.n {
			t.Errorf("Count(%q, %q) = %d, %d; want %d, %d", tt.lines, tt.want, first, n, tt.first, tt.n)
		}
	}
}

// FuzzIndex: Index agrees with the window-by-window search.
func FuzzIndex(f *testing.F) {
	f.Add("a b a b a c", "a b a c", 0)
	f.Add("a a a a b", "a a b", 1)
	f.Fuzz(func(t *testing.T, l, w string, from int) {
		lines, want := strings.Fields(l), strings.Fields(w)
		if from < 0 || from > len(lines) || len(want) == 0 {
			return
		}
		naive := -1
		for at := from; at+len(want) <= len(lines); at++ {
			if strings.Join(lines[at:at+len(want)], " ") == strings.Join(want, " ") {
				naive = at
				break
			}
		}
		if got := linematch.Index(lines, want, from); got != naive {
			t.Fatalf("Index(%q, %q, %d) = %d, naive %d", l, w, from, got, naive)
		}
	})
}
