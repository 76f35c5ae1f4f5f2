// Package syncbuf is a byte buffer that goroutines may write while
// another reads it: a process's output or a logger's lines that a test
// or the bench reads as they grow.
package syncbuf

import (
	"bytes"
	"context"
	"strings"
	"sync"

	"github.com/nanofleet/nanofleet/pkg/textcut"
)

// Buffer is safe for concurrent use. The zero value keeps everything.
type Buffer struct {
	// Max, when above zero, bounds what is kept: once the buffer holds
	// Max bytes, later writes are dropped (and reported written), so the
	// start of a long output survives.
	Max int

	mu   sync.Mutex
	buf  bytes.Buffer
	grew chan struct{} // closed at the next write kept; made on demand
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Max > 0 && b.buf.Len() >= b.Max {
		return len(p), nil
	}
	if b.grew != nil && len(p) > 0 {
		close(b.grew)
		b.grew = nil
	}
	return b.buf.Write(p)
}

// String is everything kept so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Grown is closed when the buffer next keeps more bytes: a reader waits
// on it instead of polling [Buffer.String].
func (b *Buffer) Grown() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.grew == nil {
		b.grew = make(chan struct{})
	}
	return b.grew
}

// Await waits until what is kept contains s: nil then, ctx's error when
// ctx ends first.
func (b *Buffer) Await(ctx context.Context, s string) error {
	for {
		grown := b.Grown()
		if strings.Contains(b.String(), s) {
			return nil
		}
		select {
		case <-grown:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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
