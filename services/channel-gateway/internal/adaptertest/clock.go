package adaptertest

import (
	"sync"
	"time"
)

// Clock is a fake clock for an adapter's streams (its WithStreamClock):
// it stands still until a wait asks it to pass, and then passes at once
// by that wait. Times read from it between two waits are equal, so a
// fake stamping the calls it receives with Now shows the waits the
// streams made between them, whatever the machine's load.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock standing at an arbitrary time.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After moves the clock on by d and returns a channel holding the new
// time.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(max(d, 0))
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}
