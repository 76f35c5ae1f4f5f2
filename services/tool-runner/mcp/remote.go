package mcp

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/services/tool-runner/netguard"
)

// httpClient returns the client of a remote server: every connection goes
// through a netguard.Guard allowing only c.AllowCIDRs among the blocked
// ranges, no proxy from the environment (it would dial unchecked), the
// configured headers on every request, and the guard's redirect policy.
// It has no overall timeout: an SSE stream lives as long as the session;
// calls are bounded by their ctx.
func httpClient(c ServerConfig, opts ...netguard.Option) (*http.Client, error) {
	g, err := netguard.New(netguard.Config{AllowCIDRs: c.AllowCIDRs}, opts...)
	if err != nil {
		return nil, err
	}
	tr := g.Transport()
	tr.MaxIdleConns = 8
	tr.IdleConnTimeout = 90 * time.Second
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, fmt.Errorf("url %q: %w", c.URL, err)
	}
	return &http.Client{
		Transport:     &headerTransport{base: tr, headers: c.Headers, host: u.Host},
		CheckRedirect: netguard.CheckRedirect,
	}, nil
}

// headerTransport adds the configured headers to every request to the
// configured host that does not set them itself; a redirect to another
// host does not get them (they often hold credentials).
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	host    string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 && strings.EqualFold(req.URL.Host, t.host) {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			if req.Header.Get(k) == "" {
				req.Header.Set(k, v)
			}
		}
	}
	return t.base.RoundTrip(req)
}

// closeIdle releases a client's idle connections.
func closeIdle(c *http.Client) {
	if c != nil {
		c.CloseIdleConnections()
	}
}
