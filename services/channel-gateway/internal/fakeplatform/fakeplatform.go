// Package fakeplatform holds what the chat platforms' fakes (feishutest,
// dingtalktest, …) share: the calls they received, which tests wait on;
// failures scripted per kind of call; the one event connection a
// platform keeps per client, and the test server closed with it
// ([Serve]). A fake's Server embeds them, so that their
// methods for tests (Calls, Next, None; Fail, Pass; WaitConnected,
// WaitConnections, Connections) are the fake's, the same on every
// platform.
package fakeplatform

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Recorder records what a fake received in order (its API calls, the
// client's acknowledgements), for tests to wait on; kind names an item's
// kind (an API method, a route, the id acknowledged).
type Recorder[C any] struct {
	name string
	kind func(C) string
	ch   chan C
}

// NewRecorder returns a record named name in failure messages (e.g.
// "slacktest calls"), holding up to 1000 items not yet waited for.
func NewRecorder[C any](name string, kind func(C) string) *Recorder[C] {
	return &Recorder[C]{name: name, kind: kind, ch: make(chan C, 1000)}
}

// Add records c.
func (r *Recorder[C]) Add(c C) { r.ch <- c }

// Calls is the items not yet taken, for tests that read them directly.
func (r *Recorder[C]) Calls() <-chan C { return r.ch }

// Next waits for the next item of one of kinds, skipping others.
func (r *Recorder[C]) Next(t testing.TB, timeout time.Duration, kinds ...string) C {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case c := <-r.ch:
			if r.is(c, kinds) {
				return c
			}
		case <-deadline:
			t.Fatalf("%s: no %v within %s", r.name, kinds, timeout)
			var zero C
			return zero
		}
	}
}

// None reports an error for every item of one of kinds recorded and not
// yet taken. Call it once whatever could still make such a call is over
// (a reply's delivery: gatewaytest.WaitDelivered): that none came within
// some time would prove nothing on a loaded machine.
func (r *Recorder[C]) None(t testing.TB, kinds ...string) {
	t.Helper()
	for {
		select {
		case c := <-r.ch:
			if r.is(c, kinds) {
				t.Errorf("%s: unexpected %s: %+v", r.name, r.kind(c), c)
			}
		default:
			return
		}
	}
}

func (r *Recorder[C]) is(c C, kinds []string) bool {
	k := r.kind(c)
	for _, want := range kinds {
		if k == want {
			return true
		}
	}
	return false
}

// Script holds failures scripted per kind of call, taken in order.
// The zero value is ready to use.
type Script[F any] struct {
	mu   sync.Mutex
	fail map[string][]*F // nil: a call let through
}

// Fail makes the next calls of kind fail as given, in order.
func (s *Script[F]) Fail(kind string, f ...F) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range f {
		s.queue(kind, &f)
	}
}

// Pass lets the next n calls of kind through, before the failures
// scripted after.
func (s *Script[F]) Pass(kind string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.queue(kind, nil)
	}
}

// queue appends f; called with s.mu held.
func (s *Script[F]) queue(kind string, f *F) {
	if s.fail == nil {
		s.fail = map[string][]*F{}
	}
	s.fail[kind] = append(s.fail[kind], f)
}

// Take pops the next failure scripted for kind, or nil: none, or a call
// let through.
func (s *Script[F]) Take(kind string) *F {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs := s.fail[kind]
	if len(fs) == 0 {
		return nil
	}
	s.fail[kind] = fs[1:]
	return fs[0]
}

// Link is the one event connection a platform keeps per client: a new
// one closes the previous. The zero value is ready to use.
type Link struct {
	mu        sync.Mutex
	conn      *websocket.Conn
	n         int
	connected chan struct{} // closed while a connection is open
	opened    chan struct{} // closed and replaced at each new connection
}

func (l *Link) init() {
	if l.connected == nil {
		l.connected, l.opened = make(chan struct{}), make(chan struct{})
	}
}

// Open makes c the connection, closing the previous one; call the
// returned function when c's handler returns.
func (l *Link) Open(c *websocket.Conn) (closed func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.init()
	if l.conn != nil {
		_ = l.conn.CloseNow()
	}
	l.conn = c
	l.n++
	// Still closed when the previous connection's handler has not
	// returned yet: a client that reconnects at once comes before it.
	select {
	case <-l.connected:
	default:
		close(l.connected)
	}
	close(l.opened)
	l.opened = make(chan struct{})
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.conn == c {
			l.conn = nil
			l.connected = make(chan struct{})
		}
	}
}

// Conn is the open connection, or nil.
func (l *Link) Conn() *websocket.Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn
}

// Close closes the open connection, at the end of a test.
func (l *Link) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		_ = l.conn.CloseNow()
	}
}

// Connections is how many connections were opened so far.
func (l *Link) Connections() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Write sends one message of type typ on the open connection, waiting up
// to 10 s for one to be open.
func (l *Link) Write(t testing.TB, typ websocket.MessageType, data []byte) {
	t.Helper()
	l.WaitConnected(t, 10*time.Second)
	c := l.Conn()
	if c == nil {
		t.Fatal("the event connection closed before the write")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, typ, data); err != nil {
		t.Fatalf("write on the event connection: %v", err)
	}
}

// WaitConnected waits until a connection is open.
func (l *Link) WaitConnected(t testing.TB, timeout time.Duration) {
	t.Helper()
	l.mu.Lock()
	l.init()
	ch := l.connected
	l.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(timeout):
		t.Fatalf("no event connection within %s", timeout)
	}
}

// WaitConnections waits until n connections were opened in all.
func (l *Link) WaitConnections(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		l.init()
		got, ch := l.n, l.opened
		l.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d event connections within %s, want %d", got, timeout, n)
		}
	}
}

// Serve starts a test server for h, a fake whose event connection is
// link, and returns its URL. At the end of the test it closes the
// connection, which the server's Close leaves open (it is hijacked), and
// then the server.
func Serve(t testing.TB, h http.Handler, link *Link) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		link.Close()
		srv.Close()
	})
	return srv.URL
}

// Files are the files a fake serves for download, by name. The zero
// value is ready to use.
type Files struct {
	mu   sync.Mutex
	data map[string][]byte
}

// Add makes data downloadable as name.
func (f *Files) Add(name string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.data == nil {
		f.data = map[string][]byte{}
	}
	f.data[name] = data
}

// Serve answers with the file called name, or 404.
func (f *Files) Serve(w http.ResponseWriter, r *http.Request, name string) {
	f.mu.Lock()
	data, ok := f.data[name]
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write(data)
}

// Stamp is the time a fake stamps the calls it records with: time.Now
// until SetClock gives another (e.g. an adaptertest.Clock's Now), so that
// a test checks pacing by the clock the adapter paces by.
type Stamp struct {
	mu  sync.Mutex
	now func() time.Time
}

// SetClock makes [Stamp.Now] read from now.
func (s *Stamp) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// Now is the time a call is stamped with.
func (s *Stamp) Now() time.Time {
	s.mu.Lock()
	now := s.now
	s.mu.Unlock()
	if now == nil {
		return time.Now()
	}
	return now()
}
