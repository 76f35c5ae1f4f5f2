// Package netguard keeps web tools away from addresses they must not
// reach: loopback, private and unique-local ranges, link-local (where cloud
// metadata services live), CGNAT, multicast and reserved ranges.
//
// The check happens when a connection is dialled, on the address actually
// dialled, after DNS resolution: a redirect to http://169.254.169.254/, a
// host name that resolves to 127.0.0.1, or a DNS answer that changes
// between two lookups (rebinding) all meet the same check, because every
// connection, the first and each one after a redirect, goes through
// [Guard.DialContext], and the connection is made to the very address
// that was checked. A net.Dialer Control function checks again just
// before connect(2) as a second line. Operators can allow ranges by CIDR
// (a self-hosted SearXNG on the LAN, a test server on 127.0.0.1).
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
)

// Config lists the ranges allowed despite the block list. Its JSON key is
// tools.web.fetch.allowCIDRs.
type Config struct {
	AllowCIDRs []string `json:"allowCIDRs"`
}

// Validate reports every allow-list entry that is not a CIDR prefix.
func (c Config) Validate() error {
	var p config.Problems
	for _, s := range c.AllowCIDRs {
		if _, err := netip.ParsePrefix(s); err != nil {
			p.Add("tools.web.fetch.allowCIDRs", "%q is not a CIDR prefix such as 10.0.0.0/8: %w", s, err)
		}
	}
	return p.Err()
}

// Resolver resolves host names; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard dials only allowed addresses. It is safe for concurrent use.
type Guard struct {
	allow    []netip.Prefix
	resolver Resolver
	timeout  time.Duration
}

// Option changes a Guard.
type Option func(*Guard)

// WithResolver replaces the system resolver (tests use it to make a name
// resolve to a private address).
func WithResolver(r Resolver) Option { return func(g *Guard) { g.resolver = r } }

// New validates cfg and returns a Guard.
func New(cfg Config, opts ...Option) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Guard{resolver: net.DefaultResolver, timeout: 10 * time.Second}
	for _, s := range cfg.AllowCIDRs {
		p, _ := netip.ParsePrefix(s)
		g.allow = append(g.allow, p.Masked())
	}
	for _, o := range opts {
		o(g)
	}
	return g, nil
}

type blockedRange struct {
	prefix netip.Prefix
	reason string
}

func mustRanges(pairs ...string) []blockedRange {
	out := make([]blockedRange, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, blockedRange{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return out
}

// blockedRanges are checked in order; the first match names the reason.
var blockedRanges = mustRanges(
	"169.254.169.254/32", "cloud metadata",
	"fd00:ec2::254/128", "cloud metadata",
	"0.0.0.0/8", "unspecified (\"this network\")",
	"10.0.0.0/8", "private",
	"100.64.0.0/10", "carrier-grade NAT (CGNAT)",
	"127.0.0.0/8", "loopback",
	"169.254.0.0/16", "link-local",
	"172.16.0.0/12", "private",
	"192.0.0.0/24", "IETF protocol assignment",
	"192.0.2.0/24", "documentation",
	"192.88.99.0/24", "6to4 relay",
	"192.168.0.0/16", "private",
	"198.18.0.0/15", "benchmarking",
	"198.51.100.0/24", "documentation",
	"203.0.113.0/24", "documentation",
	"224.0.0.0/4", "multicast",
	"240.0.0.0/4", "reserved",
	"::/128", "unspecified",
	"::1/128", "loopback",
	"100::/64", "discard-only",
	"2001::/32", "Teredo tunnel",
	"2001:db8::/32", "documentation",
	"fc00::/7", "unique-local (private)",
	"fe80::/10", "link-local",
	"fec0::/10", "site-local",
	"ff00::/8", "multicast",
)

// Check reports whether ip may be dialled: nil, or a *BlockedError.
func (g *Guard) Check(host string, ip netip.Addr) error {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return &BlockedError{Host: host, IP: ip, Reason: "invalid"}
	}
	for _, p := range g.allow {
		if p.Contains(ip) {
			return nil
		}
	}
	// Addresses that embed an IPv4 address are judged by it.
	if embedded, ok := embeddedIPv4(ip); ok {
		if err := g.Check(host, embedded); err != nil {
			return err
		}
	}
	for _, r := range blockedRanges {
		if r.prefix.Contains(ip) {
			return &BlockedError{Host: host, IP: ip, Reason: r.reason}
		}
	}
	return nil
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	nat64Loc  = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// embeddedIPv4 returns the IPv4 address inside a NAT64 or 6to4 address.
func embeddedIPv4(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() {
		return netip.Addr{}, false
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip), nat64Loc.Contains(ip):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// DialContext resolves addr's host, refuses blocked addresses and dials
// an allowed one. Use it as an http.Transport's DialContext.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portStr, err)
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		lookup := "ip"
		switch network {
		case "tcp4", "udp4":
			lookup = "ip4"
		case "tcp6", "udp6":
			lookup = "ip6"
		}
		if ips, err = g.resolver.LookupNetIP(ctx, lookup, host); err != nil {
			return nil, err
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("%s: no addresses", host)
		}
	}
	d := net.Dialer{
		Timeout: g.timeout,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: unparsable address %q", ErrBlocked, address)
			}
			return g.Check(host, ap.Addr())
		},
	}
	var firstErr error
	for _, ip := range ips {
		if err := g.Check(host, ip); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(ip.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		if firstErr == nil || errors.Is(firstErr, ErrBlocked) {
			firstErr = err
		}
	}
	return nil, firstErr
}

// MaxRedirects is how many redirects an [Guard.HTTPClient] follows.
const MaxRedirects = 5

// HTTPClient returns a client whose every connection goes through the
// guard, which never uses a proxy from the environment (a proxy would
// dial for us, unchecked), follows at most [MaxRedirects] redirects and
// only to http and https URLs, and gives up after timeout.
func (g *Guard) HTTPClient(timeout time.Duration) *http.Client {
	tr := g.Transport()
	tr.MaxIdleConns = 16
	tr.IdleConnTimeout = 30 * time.Second
	tr.ResponseHeaderTimeout = timeout
	return &http.Client{
		Transport:     tr,
		Timeout:       timeout,
		CheckRedirect: CheckRedirect,
	}
}

// Transport returns a transport whose every connection goes through the
// guard and which never uses a proxy from the environment (a proxy would
// dial for us, unchecked); the caller sets its idle connections and
// timeouts.
func (g *Guard) Transport() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         g.DialContext,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
	}
}

// CheckRedirect is the redirect policy of the guarded clients, for
// [http.Client.CheckRedirect]: at most [MaxRedirects], and only to http
// and https URLs.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= MaxRedirects {
		return fmt.Errorf("stopped after %d redirects", MaxRedirects)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("redirect to a %s: URL refused: only http and https are allowed", req.URL.Scheme)
	}
	return nil
}
