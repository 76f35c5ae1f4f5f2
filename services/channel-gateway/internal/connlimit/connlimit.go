// Package connlimit bounds the connections the gateway's HTTP listener
// holds open at once. Each costs a file descriptor, and the gateway shares
// its process's descriptors with its NATS connection and, in the
// all-in-one, with the embedded server's store files and the tool
// runner's sandboxes: without a bound, enough slow or idle clients (about
// 20,000 under a common limit of descriptors) made every one of those fail
// to open a file. A connection over the bound is answered 503 once its
// request has arrived (an HTTP client does not read a response sent
// before its request) and closed, so that its client learns why instead
// of waiting in the kernel's backlog; at most a few such answers are
// under way at once and each within a second, so a flood of connections
// costs no more than that, and those past it are closed unanswered.
package connlimit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// refusal is the answer to a connection over the bound (its body is
// refusalBody); HTTP/1.1, which every client reads, also for a
// WebSocket's upgrade request.
const (
	refusal     = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nRetry-After: 5\r\n\r\n%s"
	refusalBody = "too many connections; try again later\n"
)

const (
	// refusalWithin bounds all a refusal does: read the request's
	// header, answer, and read what else the client sent until it closes.
	refusalWithin = time.Second
	// refusers bounds the refusals under way at once.
	refusers = 64
	// refusalRead bounds what a refusal reads of a request.
	refusalRead = 16 << 10
)

// Listener is a net.Listener that holds at most a bound of connections
// open at once.
type Listener struct {
	net.Listener
	slots    chan struct{}
	refusers chan struct{}
	refused  func()
}

// New bounds ln to limit connections at once (limit > 0). refused, if not
// nil, is called for each connection refused (for a metric or a log).
func New(ln net.Listener, limit int, refused func()) *Listener {
	if refused == nil {
		refused = func() {}
	}
	return &Listener{Listener: ln, slots: make(chan struct{}, limit), refusers: make(chan struct{}, refusers), refused: refused}
}

// Accept returns the next connection while fewer than the bound are
// open; a connection over the bound is refused and not returned.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			release := sync.OnceFunc(func() { <-l.slots })
			if tc, ok := c.(*net.TCPConn); ok {
				return &tcpConn{TCPConn: tc, release: release}, nil
			}
			return &conn{Conn: c, release: release}, nil
		default:
		}
		l.refused()
		select {
		case l.refusers <- struct{}{}:
			go func() {
				defer func() { <-l.refusers }()
				refuse(c)
			}()
		default:
			_ = c.Close()
		}
	}
}

// refuse answers c's request 503 and closes it. The request is read
// first, and what follows it until the client closes, because closing a
// socket with unread input resets it, and the reset can destroy the
// answer before the client reads it.
func refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(refusalWithin))
	r := bufio.NewReader(io.LimitReader(c, refusalRead))
	if _, err := http.ReadRequest(r); err != nil {
		return
	}
	if _, err := fmt.Fprintf(c, refusal, len(refusalBody), refusalBody); err != nil {
		return
	}
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, r)
}

// conn gives its slot back when closed, however often Close is called
// (net/http and a hijacking WebSocket may both close it).
type conn struct {
	net.Conn
	release func()
}

func (c *conn) Close() error {
	defer c.release()
	return c.Conn.Close()
}

// tcpConn is conn for a TCP connection, keeping the methods net/http
// looks for on it: CloseWrite, which it uses so that an error answer is
// not reset away before the client reads it, and ReadFrom (sendfile).
type tcpConn struct {
	*net.TCPConn
	release func()
}

func (c *tcpConn) Close() error {
	defer c.release()
	return c.TCPConn.Close()
}

// DefaultLimit is the bound when the config sets none: half of the
// process's descriptors (the soft limit, which Go raises to the hard one
// at start), leaving the other half to everything else in the process,
// and at most max.
func DefaultLimit(max int) int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return max
	}
	return int(min(rl.Cur/2, uint64(max)))
}
