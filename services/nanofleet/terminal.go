package main

import (
	"io"
	"sync"
)

// plainWriter passes text on without the control characters a terminal
// acts on: ESC (so no escape sequence begins), the C1 controls, DEL, and
// every C0 control but tab and newline (CR, backspace, BEL among them).
// What the CLI prints comes from models and sessions (answers, tool
// hints, memory, scheduled messages), and a model can be led, by a page
// it fetched or a command's output, to write OSC 52 (which sets the
// clipboard in many terminals), a window title, or a CR that hides what
// came before on the line. What follows a dropped ESC is printed as
// text, so an attempt shows.
type plainWriter struct {
	mu sync.Mutex // chat prints tool hints and answers from two goroutines
	w  io.Writer
	// c2 holds a 0xC2 ending the last write: the first byte of a C1
	// control's UTF-8 encoding (U+0080-U+009F is C2 80-C2 9F) or of a
	// character to keep.
	c2 bool
}

func (p *plainWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]byte, 0, len(b)+1)
	i := 0
	if p.c2 {
		p.c2 = false
		if len(b) > 0 && b[0] >= 0x80 && b[0] <= 0x9f {
			i = 1
		} else {
			out = append(out, 0xc2)
		}
	}
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '\t' || c == '\n':
		case c < 0x20 || c == 0x7f:
			continue
		case c == 0xc2 && i+1 == len(b):
			p.c2 = true
			continue
		case c == 0xc2 && b[i+1] >= 0x80 && b[i+1] <= 0x9f:
			i++
			continue
		}
		out = append(out, c)
	}
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}
