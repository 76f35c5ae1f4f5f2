package watch_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/watch"
)

// TestNewOutlivesItsConnectionDropping: the gateway's connection drops
// (its node stops: in lame duck mode it closes its clients' connections)
// while New waits for the server to have the live subscription. nats.go
// fails that flush with "connection closed" although it reconnects, and
// New gave up: during a graceful restart of a node of a 3-node cluster an
// API request was answered 503 "The fleet is not reachable." at once
// (1 of 9,899 requests of 8 sessions; a web chat is closed the same way).
// New must go on once the connection is back.
func TestNewOutlivesItsConnectionDropping(t *testing.T) {
	srv := bustest.StartServer(t)
	srv.Connect(t, "") // provisions the layout
	hop := newCuttableProxy(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: hop.url + "," + srv.ClientURL(), Name: t.Name()}, nats.DontRandomize())
	if err != nil {
		t.Fatal(err)
	}
	defer b.NC.Close()
	if got := b.NC.ConnectedUrl(); got != hop.url {
		t.Fatalf("connected to %s, want the proxy %s", got, hop.url)
	}
	// The live subscription and the flush after it reach the proxy and
	// stop there; then the connection drops.
	held := hop.hold("SUB " + b.Space.Live("api", "c1") + " ")
	done := make(chan error, 1)
	go func() {
		w, err := watch.New(ctx, b, "api", "c1")
		if err == nil {
			go func() { _ = w.Run(ctx) }()
		}
		done <- err
	}()
	bustest.Receive(t, held, 10*time.Second)
	hop.cut()
	if err := bustest.Receive(t, done, 30*time.Second); err != nil {
		t.Fatalf("New with its connection dropped and back: %v", err)
	}
}

// cuttableProxy forwards TCP connections to a server. While holding, it
// keeps what clients send; cut closes every connection it has and
// forwards again.
type cuttableProxy struct {
	url string

	mu      sync.Mutex
	conns   []net.Conn
	holding bool
	want    string // what held must contain, then a PING
	held    bytes.Buffer
	seen    chan struct{}
}

func newCuttableProxy(t *testing.T, addr string) *cuttableProxy {
	t.Helper()
	ln := bustest.TakenPort(t)
	p := &cuttableProxy{url: "nats://" + ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go p.pipe(s, c, true)
			go p.pipe(c, s, false)
		}
	}()
	t.Cleanup(func() { p.cut() })
	return p
}

// hold makes the proxy keep what clients send from now on; the channel
// is closed once that holds want and a PING after it.
func (p *cuttableProxy) hold(want string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding, p.want, p.seen = true, want, make(chan struct{})
	return p.seen
}

// cut closes every connection and ends the hold.
func (p *cuttableProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns, p.holding = nil, false
}

func (p *cuttableProxy) pipe(dst, src net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			_ = dst.Close()
			return
		}
		p.mu.Lock()
		if fromClient && p.holding {
			p.held.Write(buf[:n])
			s := p.held.String()
			if i := strings.Index(s, p.want); i >= 0 && strings.Contains(s[i:], "PING\r\n") && p.seen != nil {
				close(p.seen)
				p.seen = nil
			}
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		if _, err := dst.Write(buf[:n]); err != nil {
			_ = src.Close()
			return
		}
	}
}
