package mcp

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"

	"github.com/nanofleet/nanofleet/pkg/textcut"
)

const (
	stderrHeadLines = 3
	stderrTailLines = 8
	stderrLineMax   = 400
)

// stderrLog logs what a stdio server writes to stderr, line by line at
// debug level, and keeps the first and last lines to explain a failure
// (a crash report starts with its reason and ends with the details).
type stderrLog struct {
	log *slog.Logger

	mu      sync.Mutex
	partial []byte
	head    []string
	tail    []string
	dropped int
}

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) > stderrLineMax {
		w.line(string(w.partial))
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

func (w *stderrLog) line(s string) {
	// Lines end up in errors sent in proto strings, which refuse invalid
	// UTF-8: a write may end inside a character (a long line is flushed
	// at a write's end), a server may write another encoding, and the cut
	// below keeps whole characters.
	s = strings.ToValidUTF8(strings.TrimRight(s, "\r"), "\uFFFD")
	s = textcut.Clip(s, stderrLineMax)
	if strings.TrimSpace(s) == "" {
		return
	}
	w.log.Debug("MCP server stderr", "line", s)
	if len(w.head) < stderrHeadLines {
		w.head = append(w.head, s)
		return
	}
	w.tail = append(w.tail, s)
	if len(w.tail) > stderrTailLines {
		w.tail = w.tail[1:]
		w.dropped++
	}
}

// Tail returns the first and last lines written since the last call, and
// forgets them.
func (w *stderrLog) Tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := w.head
	if w.dropped > 0 {
		lines = append(lines, "…")
	}
	lines = append(lines, w.tail...)
	if len(w.partial) > 0 {
		lines = append(lines, strings.ToValidUTF8(string(w.partial), "\uFFFD"))
	}
	w.head, w.tail, w.partial, w.dropped = nil, nil, nil, 0
	return strings.Join(lines, " | ")
}
