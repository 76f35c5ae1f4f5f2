package session

import (
	"cmp"
	"container/list"
	"slices"
	"sync"
	"time"
)

// historyCache keeps the histories a Store loaded, so that the session's
// next load reads only the records appended since. Reading every record
// after the consolidation cursor again cost each turn a scan the server
// makes message by message through everything other sessions wrote in
// between: with 200 sessions of 30 turns each, a fifth of the all-in-one's
// CPU. It holds at most max bytes of decoded records (see memSize), the
// least recently loaded sessions going first, and forgets a session not
// loaded for idle: a conversation's next message comes well within it,
// and an idle worker gives the memory back.
//
// An entry's history is never changed once stored, only replaced; its turns'
// records are shared with every History made from it: callers read them
// and never change them.
type historyCache struct {
	max  int64
	idle time.Duration

	mu      sync.Mutex
	size    int64
	lru     *list.List // of *cachedHistory, the most recently used first
	entries map[string]*list.Element
	// expiry forgets the least recently used entry when it has been idle
	// long enough; nil while the cache is empty.
	expiry *time.Timer
}

// historyIdle is how long a cached history outlives its session's last
// load.
const historyIdle = time.Minute

// cachedHistory is a session's history as a load found it.
type cachedHistory struct {
	key string
	// after is the cursor it was loaded above.
	after uint64
	// records are every record above after, those a clear left out of
	// turns included, oldest first.
	records []recordRef
	// turns and last are History.Turns and History.LastSeq; sizes are
	// the turns' records' memSizes, size their sum.
	turns []Turn
	sizes []int64
	last  uint64
	size  int64
	// used is when the entry was last stored or loaded (under the
	// cache's lock).
	used time.Time
}

// recordRef names a stored record: its sequence, and its Nats-Msg-Id
// ("turn:<turn id>"), by which a record at a cached sequence is known to
// be the one cached and not another in a stream made anew.
type recordRef struct {
	seq uint64
	id  string
}

// recordsAbove returns the index of e's first record above seq.
func (e *cachedHistory) recordsAbove(seq uint64) int {
	i, _ := slices.BinarySearchFunc(e.records, seq+1, func(r recordRef, seq uint64) int {
		return cmp.Compare(r.seq, seq)
	})
	return i
}

// memSize estimates what a record of n encoded bytes takes decoded: its
// strings and about 800 bytes of message structs (measured: 218 encoded
// bytes took 1,001 decoded, 4,182 took 5,063).
func memSize(n int) int64 { return int64(n + n/4 + 800) }

func newHistoryCache(maxBytes int64, idle time.Duration) *historyCache {
	return &historyCache{max: maxBytes, idle: idle, lru: list.New(), entries: map[string]*list.Element{}}
}

// get returns key's entry, or nil.
func (c *historyCache) get(key string) *cachedHistory {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil
	}
	e := el.Value.(*cachedHistory)
	e.used = time.Now()
	c.lru.MoveToFront(el)
	return e
}

// put stores e as its key's entry, unless it alone is above the budget.
func (c *historyCache) put(e *cachedHistory) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(e)
}

func (c *historyCache) putLocked(e *cachedHistory) {
	c.removeLocked(e.key)
	if e.size > c.max {
		return
	}
	e.used = time.Now()
	c.entries[e.key] = c.lru.PushFront(e)
	c.size += e.size
	for c.size > c.max {
		c.removeLocked(c.lru.Back().Value.(*cachedHistory).key)
	}
	if c.expiry == nil {
		c.expiry = time.AfterFunc(c.idle, c.expire)
	}
}

// expire forgets the entries idle for c.idle and waits for the next one
// to be.
func (c *historyCache) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for c.lru.Len() > 0 {
		oldest := c.lru.Back().Value.(*cachedHistory)
		if wait := oldest.used.Add(c.idle).Sub(now); wait > 0 {
			c.expiry = time.AfterFunc(wait, c.expire)
			return
		}
		c.removeLocked(oldest.key)
	}
	c.expiry = nil
}

// extend adds t, just appended with Nats-Msg-Id id after the record at
// expectLast, to key's entry if that entry ends there.
func (c *historyCache) extend(key string, expectLast uint64, t Turn, id string, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return
	}
	old := el.Value.(*cachedHistory)
	if old.last != expectLast {
		return
	}
	e := &cachedHistory{key: key, after: old.after, records: append(slices.Clone(old.records), recordRef{t.Seq, id}), last: t.Seq}
	if t.Record.GetClearsHistory() {
		e.turns, e.sizes, e.size = []Turn{t}, []int64{size}, size
	} else {
		e.turns, e.sizes, e.size = append(slices.Clone(old.turns), t), append(slices.Clone(old.sizes), size), old.size+size
	}
	c.putLocked(e)
}

// drop forgets key's entry.
func (c *historyCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(key)
}

func (c *historyCache) removeLocked(key string) {
	el, ok := c.entries[key]
	if !ok {
		return
	}
	c.size -= el.Value.(*cachedHistory).size
	c.lru.Remove(el)
	delete(c.entries, key)
}

// turnsAbove returns the index of e's first turn above seq.
func (e *cachedHistory) turnsAbove(seq uint64) int {
	i, _ := slices.BinarySearchFunc(e.turns, seq+1, func(t Turn, seq uint64) int {
		return cmp.Compare(t.Seq, seq)
	})
	return i
}

// above returns a copy of e that keeps only what is above after.
func (e *cachedHistory) above(after uint64) *cachedHistory {
	i, j := e.recordsAbove(after), e.turnsAbove(after)
	c := &cachedHistory{key: e.key, after: after, records: slices.Clone(e.records[i:]),
		turns: slices.Clone(e.turns[j:]), sizes: slices.Clone(e.sizes[j:]), last: e.last}
	for _, n := range c.sizes {
		c.size += n
	}
	return c
}

// history is e as a History of the turns above after, with a Turns of its
// own so that the caller's appends never reach the entry's.
func (e *cachedHistory) history(after uint64) *History {
	return &History{Turns: slices.Clone(e.turns[e.turnsAbove(after):]), LastSeq: e.last}
}
