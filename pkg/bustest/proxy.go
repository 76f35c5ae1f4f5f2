package bustest

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nats-io/nats.go"
)

// Proxy forwards TCP connections to a NATS server, for tests of a
// connection lost at a given moment: while holding, it keeps what clients
// send (the server never sees it); Cut closes every connection it has, so
// that clients reconnect (through it again, or to the next URL they know).
type Proxy struct {
	// URL is the proxy's client URL.
	URL string

	mu    sync.Mutex
	conns []net.Conn
	// want is what, once a client sends it, the proxy keeps with all
	// that follows, instead of forwarding it; "" forwards everything.
	want    string
	tail    string // the end of what was forwarded, for a want split between reads
	holding bool   // want was sent: keep what clients send
	frozen  bool   // forward nothing either way, close nothing
	held    bytes.Buffer
	seen    chan struct{}
}

// NewProxy starts a proxy to the server whose client URL is url
// (nats://host:port), closed at the end of the test.
func NewProxy(t testing.TB, url string) *Proxy {
	t.Helper()
	addr := strings.TrimPrefix(url, "nats://")
	ln := TakenPort(t)
	p := &Proxy{URL: "nats://" + ln.Addr().String()}
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
	t.Cleanup(p.Cut)
	return p
}

// hold makes the proxy keep, instead of forwarding, what clients send
// from want on (the read that holds it and every later one), so that the
// server never sees want; the channel is closed once what is kept holds
// want and a PING after it (a flush).
func (p *Proxy) hold(want string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.want, p.tail, p.seen = want, "", make(chan struct{})
	return p.seen
}

// CutAt cuts every connection while a client waits for the server to
// answer a flush after want (a subscription it confirms, say), so that
// the client loses its connection at that moment: it holds what clients
// send from want on (the server never sees want), runs do, which makes
// the client send want and the flush, and cuts once the hold has both. It returns
// once do has returned and the cut is done; it fails the test if do
// returned and no client had sent want and a flush, or ctx ended first.
// do runs on the caller's goroutine, so it may fail the test itself.
func (p *Proxy) CutAt(ctx context.Context, t testing.TB, want string, do func()) {
	t.Helper()
	held := p.hold(want)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cut := make(chan bool, 1)
	go func() {
		select {
		case <-held:
		case <-ctx.Done():
			select {
			case <-held:
			default:
				cut <- false
				return
			}
		}
		p.Cut()
		cut <- true
	}()
	do()
	cancel()
	if !Receive(t, cut, 10*time.Second) {
		t.Fatalf("the proxy never held %q and a flush after it: nothing was cut", want)
	}
}

// Freeze makes the proxy forward nothing either way from now on, closing
// nothing: a node that froze, or was cut off the network (no FIN, no RST).
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
}

// Connect connects a bus through the proxy, with next as the URL to
// reconnect to once the proxy's connection is lost (nats.go tries the
// URLs in order), and closes it at the end of the test.
func (p *Proxy) Connect(t testing.TB, next string, opts ...nats.Option) *bus.Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: p.URL + "," + next, Name: t.Name()}, append([]nats.Option{nats.DontRandomize()}, opts...)...)
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	t.Cleanup(b.NC.Close)
	if got := b.NC.ConnectedUrl(); got != p.URL {
		t.Fatalf("connected to %s, want the proxy %s", got, p.URL)
	}
	return b
}

// Cut closes every connection and ends the hold.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns, p.want, p.holding = nil, "", false
}

func (p *Proxy) pipe(dst, src net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			_ = dst.Close()
			return
		}
		p.mu.Lock()
		if p.frozen {
			p.mu.Unlock()
			continue
		}
		if fromClient && p.want != "" && !p.holding {
			scan := p.tail + string(buf[:n])
			p.holding = strings.Contains(scan, p.want)
			p.tail = scan[max(0, len(scan)-len(p.want)):]
		}
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
