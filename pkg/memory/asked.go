package memory

import (
	"sync"
	"time"
)

// askedKeep is how long a consolidation request is remembered at least
// (and at most twice that): far longer than a consolidator takes to work
// off its backlog.
const askedKeep = 10 * time.Minute

// askedTable remembers, per session, the end of the newest range this
// store asked to consolidate, so that the turns of a session waiting for
// a consolidator do not ask again on every turn. A session is forgotten
// on its next turn once the consolidator has moved its cursor past the
// range; one that never comes back would stay forever, one entry per
// session the worker ever served, so the table keeps two generations and
// drops the older one every askedKeep. A session that returns after that
// with its range still not consolidated asks once more, which costs one
// message: the consolidator skips a range already done.
type askedTable struct {
	mu        sync.Mutex
	keep      time.Duration
	now       func() time.Time
	rotated   time.Time
	cur, prev map[string]uint64
}

func newAskedTable(keep time.Duration, now func() time.Time) *askedTable {
	return &askedTable{keep: keep, now: now, rotated: now(), cur: map[string]uint64{}, prev: map[string]uint64{}}
}

// rotate drops the older generation when its time has come. Called with
// mu held.
func (a *askedTable) rotate() {
	if now := a.now(); now.Sub(a.rotated) >= a.keep {
		a.prev, a.cur, a.rotated = a.cur, map[string]uint64{}, now
	}
}

// get returns the end of the newest range asked for the session (0: none).
func (a *askedTable) get(key string) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rotate()
	return max(a.cur[key], a.prev[key])
}

// put records that the session's history up to to was asked for.
func (a *askedTable) put(key string, to uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rotate()
	if max(a.cur[key], a.prev[key]) < to {
		a.cur[key] = to
		delete(a.prev, key)
	}
}

// forget drops the session once the consolidation cursor passed what was
// asked.
func (a *askedTable) forget(key string, cursor uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range []map[string]uint64{a.cur, a.prev} {
		if to, ok := m[key]; ok && to <= cursor {
			delete(m, key)
		}
	}
}

// len is how many sessions the table holds.
func (a *askedTable) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cur) + len(a.prev)
}
