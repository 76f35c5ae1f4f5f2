package llmtest

import (
	"sync"
	"time"
)

// Held is a script that holds one message's answer: asked text, the model
// answers reply only once Release is called (or a minute later, so that a
// failed test does not hang on it); every other message gets other's
// answer. Give [Held.Script] to [Server.Handle].
type Held struct {
	// Asked is closed when the model is first asked text.
	Asked <-chan struct{}

	text        string
	reply       Reply
	other       Script
	asked       chan struct{}
	released    chan struct{}
	askOnce     sync.Once
	releaseOnce sync.Once
}

// Hold returns a script holding the answer to text; see [Held].
func Hold(text string, reply Reply, other Script) *Held {
	asked := make(chan struct{})
	return &Held{Asked: asked, text: text, reply: reply, other: other, asked: asked, released: make(chan struct{})}
}

// Script answers req.
func (h *Held) Script(req *RecordedRequest) Reply {
	if req.LastUserText() != h.text {
		return h.other(req)
	}
	h.askOnce.Do(func() { close(h.asked) })
	select {
	case <-h.released:
	case <-time.After(time.Minute):
	}
	return h.reply
}

// Release lets the held answer go; later calls do nothing.
func (h *Held) Release() { h.releaseOnce.Do(func() { close(h.released) }) }
