package syncbuf_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestAwait: Await returns once a concurrent write brings s, and with
// ctx's error when s never comes; a write dropped past Max wakes nobody.
func TestAwait(t *testing.T) {
	t.Run("written later", func(t *testing.T) {
		var b syncbuf.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- b.Await(ctx, "ready") }()
		for _, w := range []string{"starting\n", "rea", "dy\n"} {
			_, _ = b.Write([]byte(w))
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Await = %v; kept %q", err, b.String())
			}
		case <-ctx.Done():
			t.Fatalf("Await did not return; kept %q", b.String())
		}
	})
	t.Run("never written", func(t *testing.T) {
		b := syncbuf.Buffer{}
		_, _ = b.Write([]byte("other"))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := b.Await(ctx, "ready"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Await = %v, want context.Canceled", err)
		}
	})
	t.Run("a dropped write wakes nobody", func(t *testing.T) {
		b := syncbuf.Buffer{Max: 2}
		_, _ = b.Write([]byte("ab"))
		grown := b.Grown()
		_, _ = b.Write([]byte("cd"))
		select {
		case <-grown:
			t.Fatal("Grown closed by a write that was not kept")
		default:
		}
	})
	t.Run("a kept write wakes", func(t *testing.T) {
		var b syncbuf.Buffer
		grown := b.Grown()
		_, _ = b.Write([]byte("x"))
		select {
		case <-grown:
		default:
			t.Fatal("Grown not closed by a kept write")
		}
	})
}
