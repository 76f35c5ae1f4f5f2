package fakeplatform_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/fakeplatform"
)

type call struct{ kind, body string }

func TestNextSkipsOtherKinds(t *testing.T) {
	calls := fakeplatform.NewRecorder("fake", func(c call) string { return c.kind })
	calls.Add(call{"token", ""})
	calls.Add(call{"send", "one"})
	calls.Add(call{"send", "two"})
	if c := calls.Next(t, time.Second, "send"); c.body != "one" {
		t.Fatalf("first send = %q, want one", c.body)
	}
	if c := calls.Next(t, time.Second, "edit", "send"); c.body != "two" {
		t.Fatalf("next send = %q, want two", c.body)
	}
	if n := len(calls.Calls()); n != 0 {
		t.Fatalf("%d calls left, want 0", n)
	}
}

func TestScriptTakesInOrderPerKind(t *testing.T) {
	var s fakeplatform.Script[int]
	if f := s.Take("send"); f != nil {
		t.Fatalf("empty script gave %d", *f)
	}
	s.Fail("send", 429, 500)
	s.Fail("edit", 400)
	for _, want := range []int{429, 500} {
		if f := s.Take("send"); f == nil || *f != want {
			t.Fatalf("Take(send) = %v, want %d", f, want)
		}
	}
	if f := s.Take("send"); f != nil {
		t.Fatalf("exhausted script gave %d", *f)
	}
	if f := s.Take("edit"); f == nil || *f != 400 {
		t.Fatalf("Take(edit) = %v, want 400", f)
	}
}

// TestLinkWritesOnTheOpenConnection: Write waits for the client's
// connection and the client reads what was written, in order.
func TestLinkWritesOnTheOpenConnection(t *testing.T) {
	var link fakeplatform.Link
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		closed := link.Open(c)
		defer closed()
		<-r.Context().Done()
	}))
	defer srv.Close()
	defer link.Close()
	got := make(chan string, 2)
	go func() {
		c, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			got <- "dial: " + err.Error()
			return
		}
		defer c.CloseNow()
		for range 2 {
			_, data, err := c.Read(t.Context())
			if err != nil {
				got <- "read: " + err.Error()
				return
			}
			got <- string(data)
		}
	}()
	link.Write(t, websocket.MessageText, []byte("one"))
	link.Write(t, websocket.MessageBinary, []byte("two"))
	for _, want := range []string{"one", "two"} {
		select {
		case g := <-got:
			if g != want {
				t.Fatalf("client read %q, want %q", g, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("client read nothing; want %q", want)
		}
	}
}

// TestLinkReconnectBeforeTheOldHandlerEnds: a client that connects again
// before the handler of its previous connection has returned (the server
// has not read the close yet) gets the new connection counted and
// waited-for. Open closed the already closed "connected" channel there,
// so the new connection's handler panicked and WaitConnections timed out
// (seen as "1 event connections within 10s, want 2" in a loaded run).
func TestLinkReconnectBeforeTheOldHandlerEnds(t *testing.T) {
	var link fakeplatform.Link
	release, opened := make(chan struct{}), make(chan struct{}, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer link.Open(c)()
		opened <- struct{}{}
		<-release // the handlers return only when the test ends
	}))
	defer srv.Close()
	defer link.Close()
	defer close(release)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	first, _, err := websocket.Dial(t.Context(), url, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer first.CloseNow()
	bustest.Receive(t, opened, 5*time.Second) // the first connection is open
	// The second connection while the test waits for it.
	type dialed struct {
		c   *websocket.Conn
		err error
	}
	second := make(chan dialed, 1)
	go func() {
		c, _, err := websocket.Dial(t.Context(), url, nil)
		second <- dialed{c, err}
	}()
	link.WaitConnections(t, 2, 5*time.Second)
	d := bustest.Receive(t, second, 5*time.Second)
	if d.err != nil {
		t.Fatalf("second dial: %v", d.err)
	}
	defer d.c.CloseNow()
	bustest.Receive(t, opened, 5*time.Second) // Open returned for the second
	link.WaitConnected(t, time.Second)
	if n := link.Connections(); n != 2 {
		t.Errorf("Connections() = %d, want 2", n)
	}
}

// TestServeClosesAtTheEnd: the server Serve starts answers until its test
// ends, and then the client's event connection is closed, so that a
// client still reading does not outlive the test.
func TestServeClosesAtTheEnd(t *testing.T) {
	var link fakeplatform.Link
	var c *websocket.Conn
	t.Run("serve", func(t *testing.T) {
		url := fakeplatform.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer link.Open(c)()
			_, _, _ = c.Read(r.Context())
		}), &link)
		var err error
		c, _, err = websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(url, "http"), nil)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		link.WaitConnected(t, 5*time.Second)
	})
	if c == nil {
		t.FailNow()
	}
	defer c.CloseNow()
	read := make(chan error, 1)
	go func() {
		_, _, err := c.Read(t.Context())
		read <- err
	}()
	if err := bustest.Receive(t, read, 5*time.Second); err == nil {
		t.Fatal("the connection is still open after the test that served it")
	}
}

func TestFilesServeByName(t *testing.T) {
	var files fakeplatform.Files
	files.Add("a.txt", []byte("hello"))
	tests := []struct {
		name     string
		wantCode int
		wantBody string
	}{
		{"a.txt", http.StatusOK, "hello"},
		{"b.txt", http.StatusNotFound, "404 page not found\n"},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		files.Serve(w, httptest.NewRequest(http.MethodGet, "/files/"+tt.name, nil), tt.name)
		if w.Code != tt.wantCode || w.Body.String() != tt.wantBody {
			t.Errorf("%s: %d %q, want %d %q", tt.name, w.Code, w.Body.String(), tt.wantCode, tt.wantBody)
		}
	}
}
