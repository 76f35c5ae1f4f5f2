package sandbox

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// HeadTail is an io.Writer that keeps the first and the last limit/2
// bytes written to it and counts the rest, so that capturing a command
// that prints gigabytes costs at most limit bytes. It is safe for
// concurrent use.
type HeadTail struct {
	mu    sync.Mutex
	limit int
	head  []byte
	tail  []byte // ring buffer of len limit-limit/2 once full
	pos   int    // next write position in tail
	full  bool   // tail has wrapped
	total int64
}

// NewHeadTail returns a writer keeping at most limit bytes.
func NewHeadTail(limit int) *HeadTail {
	if limit < 2 {
		limit = 2
	}
	return &HeadTail{limit: limit, head: make([]byte, 0, limit/2)}
}

// Write never fails and always reports len(p).
func (h *HeadTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(p)
	h.total += int64(n)
	if room := cap(h.head) - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	size := h.limit - cap(h.head)
	if h.tail == nil {
		h.tail = make([]byte, size)
	}
	if len(p) >= size {
		copy(h.tail, p[len(p)-size:])
		h.pos, h.full = 0, true
		return n, nil
	}
	k := copy(h.tail[h.pos:], p)
	if k < len(p) {
		copy(h.tail, p[k:])
		h.full = true
	}
	h.pos = (h.pos + len(p)) % size
	if h.pos == 0 && len(p) > 0 {
		h.full = true
	}
	return n, nil
}

// Total is the number of bytes written.
func (h *HeadTail) Total() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

// Truncated reports whether bytes were dropped.
func (h *HeadTail) Truncated() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total > int64(h.limit)
}

// String returns the kept text as valid UTF-8: everything if it fit, else
// the head, a note of how much was left out, and the tail.
func (h *HeadTail) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var tail []byte
	if h.full {
		tail = append(append(tail, h.tail[h.pos:]...), h.tail[:h.pos]...)
	} else {
		tail = h.tail[:h.pos]
	}
	if h.total <= int64(h.limit) {
		return strings.ToValidUTF8(string(h.head)+string(tail), "\uFFFD")
	}
	head := trimIncompleteEnd(h.head)
	tail = trimIncompleteStart(tail)
	omitted := h.total - int64(len(head)) - int64(len(tail))
	return strings.ToValidUTF8(string(head), "\uFFFD") +
		fmt.Sprintf("\n\n... [%d bytes of output omitted] ...\n\n", omitted) +
		strings.ToValidUTF8(string(tail), "\uFFFD")
}

// trimIncompleteEnd drops a UTF-8 sequence cut at the end of b.
func trimIncompleteEnd(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return b
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// trimIncompleteStart drops continuation bytes at the start of b.
func trimIncompleteStart(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && i < len(b); i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b
}
