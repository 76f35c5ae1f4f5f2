package netguard_test

import (
	"errors"
	"io"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/tool-runner/netguard"
	"github.com/nanofleet/nanofleet/services/tool-runner/netguard/netguardtest"
)

func TestCheck(t *testing.T) {
	g, err := netguard.New(netguard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ip     string
		reason string // "" means allowed
	}{
		{"93.184.216.34", ""},
		{"2606:2800:220:1:248:1893:25c8:1946", ""},
		{"127.0.0.1", "loopback"},
		{"127.8.9.10", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"10.1.2.3", "private"},
		{"172.20.0.1", "private"},
		{"192.168.1.1", "private"},
		{"100.64.0.1", "carrier-grade NAT (CGNAT)"},
		{"169.254.169.254", "cloud metadata"},
		{"169.254.1.1", "link-local"},
		{"fd00:ec2::254", "cloud metadata"},
		{"fd12:3456::1", "unique-local (private)"},
		{"fe80::1", "link-local"},
		{"0.0.0.0", "unspecified (\"this network\")"},
		{"::", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"255.255.255.255", "reserved"},
		{"64:ff9b::7f00:1", "loopback"},
		{"64:ff9b::a9fe:a9fe", "cloud metadata"},
		{"2002:a9fe:a9fe::1", "cloud metadata"},
	}
	for _, tt := range tests {
		err := g.Check("", netip.MustParseAddr(tt.ip))
		var be *netguard.BlockedError
		switch {
		case tt.reason == "" && err != nil:
			t.Errorf("%s blocked: %v", tt.ip, err)
		case tt.reason != "" && (!errors.As(err, &be) || be.Reason != tt.reason || !errors.Is(err, netguard.ErrBlocked)):
			t.Errorf("%s: %v, want blocked as %q", tt.ip, err, tt.reason)
		}
	}
}

func TestAllowList(t *testing.T) {
	g, err := netguard.New(netguard.Config{AllowCIDRs: []string{"127.0.0.0/8", "10.9.0.0/16"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ip := range []string{"127.0.0.1", "::ffff:127.0.0.1", "10.9.8.7"} {
		if err := g.Check("", netip.MustParseAddr(ip)); err != nil {
			t.Errorf("%s: %v", ip, err)
		}
	}
	for _, ip := range []string{"10.8.0.1", "169.254.169.254"} {
		if err := g.Check("", netip.MustParseAddr(ip)); err == nil {
			t.Errorf("%s allowed", ip)
		}
	}
	if _, err := netguard.New(netguard.Config{AllowCIDRs: []string{"localhost"}}); err == nil {
		t.Error("bad CIDR accepted")
	}
}

func TestLoopbackRefusedWithoutAllowList(t *testing.T) {
	srv := netguardtest.NewTarget(t, "")
	g, _ := netguard.New(netguard.Config{})
	_, err := g.HTTPClient(5 * time.Second).Get(srv.URL)
	if !errors.Is(err, netguard.ErrBlocked) {
		t.Fatalf("GET %s: %v, want blocked", srv.URL, err)
	}
	if srv.Hits() != 0 {
		t.Fatal("the server was reached")
	}
}

func TestNameResolvingToLoopbackRefused(t *testing.T) {
	srv := netguardtest.NewTarget(t, "")
	g, _ := netguard.New(netguard.Config{}, netguard.WithResolver(netguardtest.Resolver{"rebind.example.com": "127.0.0.1"}))
	_, err := g.HTTPClient(5 * time.Second).Get("http://rebind.example.com:" + strconv.Itoa(int(srv.Port())) + "/")
	var be *netguard.BlockedError
	if !errors.As(err, &be) || be.Host != "rebind.example.com" {
		t.Fatalf("err = %v, want blocked naming the host", err)
	}
	if srv.Hits() != 0 {
		t.Fatal("the server was reached")
	}
}

func TestRedirectToMetadataRefused(t *testing.T) {
	srv := netguardtest.NewRedirector(t, "http://169.254.169.254/latest/meta-data/")
	g, _ := netguard.New(netguard.Config{AllowCIDRs: []string{"127.0.0.0/8"}})
	resp, err := g.HTTPClient(5 * time.Second).Get(srv.URL)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	var be *netguard.BlockedError
	if !errors.As(err, &be) || be.Reason != "cloud metadata" {
		t.Fatalf("err = %v, want the metadata address blocked", err)
	}
}

func TestRedirectToOtherSchemeRefused(t *testing.T) {
	srv := netguardtest.NewRedirector(t, "file:///etc/passwd")
	g, _ := netguard.New(netguard.Config{AllowCIDRs: []string{"127.0.0.0/8"}})
	if _, err := g.HTTPClient(5 * time.Second).Get(srv.URL); err == nil {
		t.Fatal("redirect to file: followed")
	}
}
