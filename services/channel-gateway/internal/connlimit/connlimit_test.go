package connlimit_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/connlimit"
)

// TestConnectionsOverTheBoundAreRefused: with two connections held open
// by clients that send nothing, a third is answered 503 at once; when one
// of the two goes, its slot serves requests again.
func TestConnectionsOverTheBoundAreRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ReadHeaderTimeout: time.Minute, // the idle clients must keep their slots for the test
	}
	go func() { _ = srv.Serve(connlimit.New(ln, 2, func() { refused.Add(1) })) }()
	t.Cleanup(func() { _ = srv.Close() })

	// The kernel queues connections in the order they were made and the
	// server accepts them in that order, so these two take the slots.
	idle := make([]net.Conn, 2)
	for i := range idle {
		if idle[i], err = net.Dial("tcp", ln.Addr().String()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = idle[i].Close() })
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func() (int, string, http.Header, error) {
		resp, err := client.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			return 0, "", nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header, err
	}
	code, body, h, err := get()
	if err != nil || code != http.StatusServiceUnavailable || body != "too many connections; try again later\n" || h.Get("Retry-After") == "" {
		t.Fatalf("third connection: %d %q %v (%v), want 503 too many connections with Retry-After", code, body, h, err)
	}
	if n := refused.Load(); n != 1 {
		t.Errorf("refused called %d times, want 1", n)
	}

	// The server sees the client go (EOF while it waits for a request)
	// and closes its side, which frees the slot.
	_ = idle[0].Close()
	bustest.Eventually(t, 10*time.Second, func() error {
		code, body, _, err := get()
		if err != nil || code != http.StatusOK || body != "ok" {
			return fmt.Errorf("%d %q %v", code, body, err)
		}
		return nil
	})
}

// TestHijackedConnectionFreesItsSlot: a WebSocket takes its connection
// from net/http (Hijack); closing it there still frees the slot.
func TestHijackedConnectionFreesItsSlot(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		_, _ = rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		_ = rw.Flush()
		_ = c.Close()
	}), ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(connlimit.New(ln, 1, nil)) }()
	t.Cleanup(func() { _ = srv.Close() })
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 3 {
		// Each request needs the one slot the previous one's hijacked
		// connection held; the server closes it before the client reads
		// the end of the answer, but the slot may be freed a moment after.
		bustest.Eventually(t, 10*time.Second, func() error {
			resp, err := client.Get("http://" + ln.Addr().String() + "/")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || string(body) != "hijacked" {
				return fmt.Errorf("request %d: %s %q %v", i, resp.Status, body, err)
			}
			return nil
		})
	}
}

// TestTCPConnectionKeepsWhatNetHTTPUses: net/http half-closes a
// connection after an error answer (CloseWrite), so that the answer is
// not reset away, and sends files with ReadFrom; a bounded connection
// keeps both.
func TestTCPConnectionKeepsWhatNetHTTPUses(t *testing.T) {
	accepted, dial := listenOne(t)
	dial()
	c := bustest.Receive(t, accepted, 10*time.Second)
	if _, ok := c.(interface{ CloseWrite() error }); !ok {
		t.Errorf("%T has no CloseWrite", c)
	}
	if _, ok := c.(io.ReaderFrom); !ok {
		t.Errorf("%T has no ReadFrom", c)
	}
}

// TestCloseTwiceFreesOneSlot: net/http and a hijacking WebSocket may both
// close a connection; that must not free a second slot.
func TestCloseTwiceFreesOneSlot(t *testing.T) {
	accepted, dial := listenOne(t)
	dial()
	first := bustest.Receive(t, accepted, 10*time.Second)
	_ = first.Close()
	_ = first.Close()
	dial()
	bustest.Receive(t, accepted, 10*time.Second) // in the freed slot
	// The slot is taken again: a third connection is refused (read: the
	// 503 to its request, then EOF) and never accepted.
	third := dial()
	if _, err := io.WriteString(third, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = third.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(third)
	if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 503") {
		t.Fatalf("third connection read %q (%v), want the 503", got, err)
	}
	select {
	case c := <-accepted:
		t.Fatalf("a third connection was accepted (%v) while the one slot is taken", c.RemoteAddr())
	default:
	}
}

// TestSilentRefusedClientIsClosed: a client over the bound that sends no
// request is closed without an answer when the refusal's second is up,
// not held.
func TestSilentRefusedClientIsClosed(t *testing.T) {
	accepted, dial := listenOne(t)
	dial()
	bustest.Receive(t, accepted, 10*time.Second)
	refused := dial()
	_ = refused.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.ReadAll(refused); err != nil || len(got) != 0 {
		t.Fatalf("silent refused client read %q (%v), want EOF and nothing", got, err)
	}
}

// listenOne serves a listener bound to one connection until the test
// ends: accepted receives what it accepts, dial connects to it.
func listenOne(t *testing.T) (accepted <-chan net.Conn, dial func() net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := connlimit.New(ln, 1, nil)
	t.Cleanup(func() { _ = l.Close() })
	ch := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			ch <- c
		}
	}()
	return ch, func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
}

func TestDefaultLimit(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skipf("no descriptor limit to read: %v", err)
	}
	if got, want := connlimit.DefaultLimit(1<<30), int(rl.Cur/2); got != want {
		t.Errorf("DefaultLimit(large) = %d, want half the soft limit %d", got, want)
	}
	if got := connlimit.DefaultLimit(3); got != min(3, int(rl.Cur/2)) {
		t.Errorf("DefaultLimit(3) = %d, want at most 3", got)
	}
}
