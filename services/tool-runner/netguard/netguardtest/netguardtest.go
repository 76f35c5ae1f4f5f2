// Package netguardtest holds what the tests of guarded clients share: a
// resolver that answers as the test says, a loopback server that counts
// the requests that reached it (a guard that works lets none by), and one
// that redirects every request elsewhere.
package netguardtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
)

// Resolver answers each of its names with its address, as a DNS server
// an attacker controls would; any other name is not found.
type Resolver map[string]string

// LookupNetIP implements netguard.Resolver.
func (r Resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ip, ok := r[host]; ok {
		return []netip.Addr{netip.MustParseAddr(ip)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// Target is a loopback HTTP server that counts the requests reaching it.
type Target struct {
	*httptest.Server
	hits atomic.Int32
}

// NewTarget starts a Target answering every request with body; it is
// closed when the test ends.
func NewTarget(t testing.TB, body string) *Target {
	s := &Target{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

// Hits is how many requests reached the server.
func (s *Target) Hits() int32 { return s.hits.Load() }

// Port is the server's port, to reach it under another name or address.
func (s *Target) Port() uint16 {
	return netip.MustParseAddrPort(s.Listener.Addr().String()).Port()
}

// NewRedirector starts a loopback server that redirects every request to
// to (302); it is closed when the test ends.
func NewRedirector(t testing.TB, to string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to, http.StatusFound)
	}))
	t.Cleanup(s.Close)
	return s
}
