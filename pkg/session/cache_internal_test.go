package session

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestHistoryCacheForgetsIdleSessions: an entry goes a minute after its
// session's last load, each on its own time, and the cache then holds
// nothing and waits for nothing.
func TestHistoryCacheForgetsIdleSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newHistoryCache(1<<20, time.Minute)
		c.put(&cachedHistory{key: "a", size: 10})
		time.Sleep(30 * time.Second)
		c.put(&cachedHistory{key: "b", size: 20})
		time.Sleep(20 * time.Second)
		if c.get("a") == nil { // a loaded again at 50 s
			t.Fatal("a forgotten after 50 s")
		}
		time.Sleep(45 * time.Second) // 95 s: b idle 65 s, a 45 s
		synctest.Wait()
		if c.get("b") != nil {
			t.Error("b kept after 65 s idle")
		}
		c.mu.Lock()
		size := c.size
		c.mu.Unlock()
		if size != 10 {
			t.Errorf("size %d with only a cached, want 10", size)
		}
		time.Sleep(time.Minute) // a loaded at 95 s by the check above, idle now
		synctest.Wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.lru.Len() != 0 || c.size != 0 || c.expiry != nil {
			t.Errorf("after every session went idle: %d entries, size %d, expiry pending %v", c.lru.Len(), c.size, c.expiry != nil)
		}
	})
}

// TestHistoryCacheBudget: the least recently used entries go first when
// the records pass the budget, and an entry alone above it is not kept.
func TestHistoryCacheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newHistoryCache(100, time.Minute)
		for _, k := range []string{"a", "b", "c"} {
			c.put(&cachedHistory{key: k, size: 40})
		}
		if c.get("a") != nil || c.get("b") == nil || c.get("c") == nil {
			t.Error("want a, the least recently used, gone and b, c kept")
		}
		c.put(&cachedHistory{key: "big", size: 101})
		if c.get("big") != nil || c.get("b") == nil {
			t.Error("want an entry above the budget not kept, and nothing evicted for it")
		}
	})
}
