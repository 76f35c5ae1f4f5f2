package toolclient

import "time"

// AgeCatalog makes c's cached catalog d older, as if time had passed.
func AgeCatalog(c *Client, d time.Duration) {
	c.cache.mu.Lock()
	defer c.cache.mu.Unlock()
	c.cache.fetched = c.cache.fetched.Add(-d)
}

// CatalogTTL is how long the cached catalog is served before a refresh.
const CatalogTTL = catalogTTL
