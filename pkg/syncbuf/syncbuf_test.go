package syncbuf_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/syncbuf"
)

func TestBuffer(t *testing.T) {
	cases := []struct {
		name           string
		b              *syncbuf.Buffer
		writes         []string
		want, wantTail string // String(), Tail(4)
	}{
		{"keeps all", &syncbuf.Buffer{}, []string{"ab", "cd", "ef"}, "abcdef", "…cdef"},
		{"short", &syncbuf.Buffer{}, []string{"ab"}, "ab", "ab"},
		{"stops at max", &syncbuf.Buffer{Max: 4}, []string{"ab", "cd", "ef"}, "abcd", "abcd"},
		{"a write that crosses max is kept whole", &syncbuf.Buffer{Max: 3}, []string{"ab", "cd", "ef"}, "abcd", "abcd"},
		{"tail starts inside a chinese character", &syncbuf.Buffer{}, []string{"a你好"}, "a你好", "…好"},
		{"tail starts inside an emoji", &syncbuf.Buffer{}, []string{"ab😀c"}, "ab😀c", "…c"},
		{"tail starts at an emoji", &syncbuf.Buffer{}, []string{"a😀😀"}, "a😀😀", "…😀"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.b
			for _, w := range c.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := b.String(); got != c.want {
				t.Errorf("String() = %q, want %q", got, c.want)
			}
			if got := b.Tail(4); got != c.wantTail {
				t.Errorf("Tail(4) = %q, want %q", got, c.wantTail)
			}
		})
	}
}

// TestBufferConcurrent is for the race detector: writers and a reader at
// once, and no write lost.
func TestBufferConcurrent(t *testing.T) {
	var b syncbuf.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := strings.Count(b.String(), "x"); got != 800 {
		t.Errorf("kept %d writes, want 800", got)
	}
}
