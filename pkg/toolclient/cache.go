package toolclient

import (
	"context"
	"sync"
	"time"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// catalogTTL is how long the cached catalog is served before it is
// fetched again: tool sets change when runners with other MCP servers come
// and go, not from turn to turn.
const catalogTTL = 10 * time.Second

// catalogCache is the runners' merged catalog as last fetched: the one
// cache behind CachedCatalog and the read-only check of a lost call.
type catalogCache struct {
	first sync.Mutex // callers wait for the first catalog one at a time

	mu         sync.Mutex
	defs       []*nanofleetv1.ToolDefinition // sorted; shared, never modified
	byName     map[string]*nanofleetv1.ToolDefinition
	fetched    time.Time // zero until the runners have answered
	refreshing bool      // a background refresh is running
}

func (k *catalogCache) store(defs []*nanofleetv1.ToolDefinition, byName map[string]*nanofleetv1.ToolDefinition) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.defs, k.byName, k.fetched = defs, byName, time.Now()
}

// lookup returns a tool's cached definition and whether the cache is
// within its lifetime.
func (k *catalogCache) lookup(name string) (d *nanofleetv1.ToolDefinition, ok, fresh bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	d, ok = k.byName[name]
	return d, ok, time.Since(k.fetched) < catalogTTL
}

// CachedCatalog is Catalog served from the client's cache, for callers
// that need it on every turn. Until the runners have answered once it
// calls Catalog, one caller at a time (an error is returned and the next
// call asks again). From then on it answers at once: a catalog older than
// its lifetime (10 s) is served while a fresh one is
// fetched in the background, and a failed refresh keeps the last one (a
// call to a runner that has gone is answered to the model). The slice is
// shared: callers must not modify it; it is the same slice until the
// cache is refreshed.
func (c *Client) CachedCatalog(ctx context.Context) ([]*nanofleetv1.ToolDefinition, error) {
	if defs, ok := c.cached(ctx); ok {
		return defs, nil
	}
	c.cache.first.Lock()
	defer c.cache.first.Unlock()
	if defs, ok := c.cached(ctx); ok {
		return defs, nil // another caller fetched it meanwhile
	}
	if _, err := c.Catalog(ctx); err != nil {
		return nil, err
	}
	defs, _ := c.cached(ctx)
	return defs, nil
}

// cached returns the cached catalog, if the runners have answered once,
// and starts a background refresh when it has outlived its lifetime.
func (c *Client) cached(ctx context.Context) ([]*nanofleetv1.ToolDefinition, bool) {
	k := &c.cache
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fetched.IsZero() {
		return nil, false
	}
	if time.Since(k.fetched) >= catalogTTL && !k.refreshing {
		k.refreshing = true
		// Gathering the runners' answers takes at least 50 ms, which no
		// turn should wait for; the refresh outlives the caller's ctx.
		go c.refresh(context.WithoutCancel(ctx))
	}
	return k.defs, true
}

// refresh fetches the catalog in the background; Catalog stores it.
func (c *Client) refresh(ctx context.Context) {
	_, err := c.Catalog(ctx)
	c.cache.mu.Lock()
	c.cache.refreshing = false
	c.cache.mu.Unlock()
	if err != nil {
		c.log.Warn("tool catalog refresh failed; keeping the last one", "err", err)
	}
}
