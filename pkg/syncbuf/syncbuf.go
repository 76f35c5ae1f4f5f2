// Package syncbuf is a byte buffer that goroutines may write while
// another reads it: a process's output or a logger's lines that a test
// or the bench reads as they grow.
package syncbuf

import (
	"bytes"
	"sync"

	"github.com/nanofleet/nanofleet/pkg/textcut"
)

// Buffer is safe for concurrent use. The zero value keeps everything.
type Buffer struct {
	// Max, when above zero, bounds what is kept: once the buffer holds
	// Max bytes, later writes are dropped (and reported written), so the
	// start of a long output survives.
	Max int

	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Max > 0 && b.buf.Len() >= b.Max {
		return len(p), nil
	}
	return b.buf.Write(p)
}

// String is everything kept so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Tail is at most the last n bytes kept, after "…" when there were more.
// It starts at a character: the tail is shown to the operator, and half a
// character at its start was shown as garbage.
func (b *Buffer) Tail(n int) string {
	s := b.String()
	if len(s) > n {
		s = "…" + textcut.Suffix(s, n)
	}
	return s
}
