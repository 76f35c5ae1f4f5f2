// Package memtrim gives a process's free memory back to the operating
// system once the process goes idle.
//
// The Go runtime collects garbage when the heap doubles and returns free
// pages slowly, so after a burst of turns a process idles at the burst's
// high-water mark: the embedded NATS server's write buffers (released ten
// seconds after the last write), its duplicate-window message ids
// (released when the window passes) and the runtime's own headroom. With
// no allocation to trigger a collection, that memory stays resident until
// the runtime's two-minute forced collection, and then mostly stays
// mapped. A Trimmer notices the quiet and runs [debug.FreeOSMemory]: a
// full collection and a return of every free page. It never runs while
// the process is busy, where it would only cost throughput.
package memtrim

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/nanofleet/nanofleet/pkg/every"
)

// Config says how a Trimmer looks for quiet.
type Config struct {
	// Every is how often it looks.
	Every time.Duration
	// IdleBytes: a period that allocated fewer bytes than this is idle.
	IdleBytes uint64
	// AfterBusy is how many idle periods in a row after activity each
	// end in a trim: caches expire and pooled buffers need two
	// collections to go, so one trim is not enough.
	AfterBusy int
	// IdleEvery: later on, every IdleEvery-th idle period trims, for
	// memory a longer timer (a duplicate window) lets go.
	IdleEvery int
}

// DefaultConfig looks every 10 s, trims on each of the first eight quiet
// periods after activity (past the minute after which a worker's history
// cache lets go of a session), then every five minutes.
func DefaultConfig() Config {
	return Config{Every: 10 * time.Second, IdleBytes: 1 << 20, AfterBusy: 8, IdleEvery: 30}
}

// Trimmer decides, one period at a time, whether to trim.
type Trimmer struct {
	cfg       Config
	allocated func() uint64
	trim      func()
	last      uint64
	idle      int // idle periods in a row
}

// New returns a Trimmer reading the runtime's allocation counter and
// trimming with debug.FreeOSMemory.
func New(cfg Config) *Trimmer {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocated := func() uint64 {
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	return newTrimmer(cfg, allocated, debug.FreeOSMemory)
}

func newTrimmer(cfg Config, allocated func() uint64, trim func()) *Trimmer {
	return &Trimmer{cfg: cfg, allocated: allocated, trim: trim, last: allocated()}
}

// Tick ends one period and reports whether it trimmed.
func (t *Trimmer) Tick() bool {
	now := t.allocated()
	delta := now - t.last
	t.last = now
	if delta >= t.cfg.IdleBytes {
		t.idle = 0
		return false
	}
	t.idle++
	if t.idle > t.cfg.AfterBusy && (t.cfg.IdleEvery <= 0 || (t.idle-t.cfg.AfterBusy)%t.cfg.IdleEvery != 0) {
		return false
	}
	t.trim()
	// The trim's own collection allocates; it must not count as activity.
	t.last = t.allocated()
	return true
}

// Run ticks every cfg.Every until ctx ends.
func Run(ctx context.Context, cfg Config) {
	if cfg.Every <= 0 {
		return
	}
	t := New(cfg)
	every.Tick(ctx, cfg.Every, func() bool {
		t.Tick()
		return true
	})
}
