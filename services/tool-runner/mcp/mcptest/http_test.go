package mcptest

import (
	"net"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bustest"
)

// TestStartHTTPPortTaken: a port another process listens on on 127.0.0.1
// is refused, although server-everything prints "listening" there too.
func TestStartHTTPPortTaken(t *testing.T) {
	bin, _ := Everything(t)
	l := bustest.TakenPort(t)
	go func() { // speaks first and not HTTP, like a NATS server
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("INFO {\"server_id\":\"x\"}\r\n"))
			_ = c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	_, err := startHTTP(t, bin, port)
	if err == nil {
		t.Fatalf("started on port %d, which another listener holds", port)
	}
	if !strings.Contains(err.Error(), "in use") {
		t.Errorf("error does not say the port is in use: %v", err)
	}
	url, _ := HTTP(t, bin)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("url %q", url)
	}
}
