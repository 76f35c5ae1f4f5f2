// Package parts remembers how many pieces of a split reply were already
// sent, so that a retried delivery continues where the failed one stopped
// instead of repeating the first pieces.
//
// A [Tracker]'s memory is per process and bounded: a reply retried on
// another gateway starts again from its first piece, shown twice unless
// the platform drops a piece sent twice by its idempotency key (Feishu's
// uuid, Discord's nonce). A [Store] keeps the count in
// JetStream, for platforms without such a key (DingTalk).
package parts

import "sync"

// maxTracked bounds the memory; past it the oldest half is forgotten.
const maxTracked = 4096

// Tracker counts sent pieces per reply id. The zero value is ready.
type Tracker struct {
	mu    sync.Mutex
	sent  map[string]int
	order []string
}

// Sent returns how many pieces of id were sent.
func (t *Tracker) Sent(id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sent[id]
}

// Mark records that n pieces of id were sent.
func (t *Tracker) Mark(id string, n int) {
	if id == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sent == nil {
		t.sent = map[string]int{}
	}
	if _, ok := t.sent[id]; !ok {
		t.order = append(t.order, id)
	}
	t.sent[id] = n
	if len(t.order) > maxTracked {
		old := t.order[:maxTracked/2]
		for _, k := range old {
			delete(t.sent, k)
		}
		t.order = append([]string(nil), t.order[maxTracked/2:]...)
	}
}

// Done forgets id once it was delivered or given up.
func (t *Tracker) Done(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.sent, id)
}
