package observe_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/observe/observetest"
)

var errNoBus = errors.New("nats: no servers available")

func TestServerRoutes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := observe.NewMetrics(reg)
	m.Turns.WithLabelValues(observe.OutcomeOK).Inc()

	tests := []struct {
		name     string
		method   string
		path     string
		ready    error
		wantCode int
		wantBody string
	}{
		{"healthz", http.MethodGet, "/healthz", nil, http.StatusOK, "ok"},
		{"healthz ignores readiness", http.MethodGet, "/healthz", errNoBus, http.StatusOK, "ok"},
		{"readyz ready", http.MethodGet, "/readyz", nil, http.StatusOK, "ready"},
		{"readyz not ready", http.MethodGet, "/readyz", errNoBus, http.StatusServiceUnavailable, "not ready: nats: no servers available"},
		{"metrics", http.MethodGet, "/metrics", nil, http.StatusOK, `nanofleet_turns_total{outcome="ok"} 1`},
		{"head healthz", http.MethodHead, "/healthz", nil, http.StatusOK, "ok"},
		{"post refused", http.MethodPost, "/healthz", nil, http.StatusMethodNotAllowed, "Method Not Allowed"},
		{"unknown path", http.MethodGet, "/debug/pprof/", nil, http.StatusNotFound, "404 page not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready := func(context.Context) error { return tt.ready }
			h := observe.NewServer("127.0.0.1:0", reg, ready).Handler()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.wantCode {
				t.Fatalf("%s %s: code %d, want %d (body %q)", tt.method, tt.path, rec.Code, tt.wantCode, rec.Body)
			}
			if !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("%s %s: body %q does not contain %q", tt.method, tt.path, rec.Body, tt.wantBody)
			}
		})
	}
}

func TestReadyGetsDeadline(t *testing.T) {
	var deadline time.Time
	var ok bool
	h := observe.NewServer(":0", nil, func(ctx context.Context) error {
		deadline, ok = ctx.Deadline()
		return nil
	}).Handler()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if !ok {
		t.Fatal("readiness function called without a deadline")
	}
	if d := time.Until(deadline); d <= 0 || d > observe.ReadyTimeout {
		t.Fatalf("deadline in %v, want within (0, %v]", d, observe.ReadyTimeout)
	}
}

func TestNilArgumentsServe(t *testing.T) {
	h := observe.NewServer(":0", nil, nil).Handler()
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s with nil registry and readiness: code %d, want 200", path, rec.Code)
		}
	}
}

// TestLifecycle runs the server on loopback: it serves once Run listens
// and stops when Run's context ends. (Draining is svc.Observability's:
// TestObservabilityDrains.)
func TestLifecycle(t *testing.T) {
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	s := observe.NewServer("127.0.0.1:0", observe.NewRegistry(), nil)
	if s.Addr() != nil {
		t.Fatalf("Addr before Run = %v, want nil", s.Addr())
	}
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	waitListening(t, s, ran)
	if err := s.Run(ctx); !errors.Is(err, observe.ErrStarted) {
		t.Fatalf("second Run: %v, want ErrStarted", err)
	}
	base := "http://" + s.Addr().String()

	observetest.Walk(t, base, []observetest.Step{
		{Name: "alive", Path: "/healthz", WantCode: 200, WantBody: "ok"},
		{Name: "ready", Path: "/readyz", WantCode: 200, WantBody: "ready"},
		{Name: "runtime metrics", Path: "/metrics", WantCode: 200, WantBody: "go_goroutines"},
	})

	stop()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run after its context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("server still answers after Run returned")
	}
	if err := s.Run(t.Context()); !errors.Is(err, observe.ErrStarted) {
		t.Fatalf("Run after Run returned: %v, want ErrStarted", err)
	}
}

func TestRunPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := observe.NewServer(ln.Addr().String(), nil, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Run must fail at once, not serve until ctx ends.
	if err := s.Run(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("Run on a taken port = %v (ctx: %v), want an error at once", err, ctx.Err())
	}
	select {
	case <-s.Listening():
		t.Fatal("Listening closed although the listen failed")
	default:
	}
}

// TestUnsentBodyHoldsNothing: a request that declares a body and never
// sends it is answered and its connection closed once the read timeout
// passes; the server does not wait for the body for good.
func TestUnsentBodyHoldsNothing(t *testing.T) {
	s := listening(t)
	answer, err := observetest.Exchange(t, s.Addr().String(), "GET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n{")
	if err != nil || !strings.HasPrefix(answer, "HTTP/1.1 200") {
		t.Fatalf("answer %q, %v; want 200 and the connection closed", answer, err)
	}
}

// TestOversizeHeadersRefused: a request whose header is larger than
// MaxHeaderBytes is refused with 431, so that a connection cannot make
// the server hold a megabyte of header (net/http's default); a
// scraper's request is served.
func TestOversizeHeadersRefused(t *testing.T) {
	s := listening(t)
	for _, tt := range []struct{ name, req, want string }{
		{"one huge header", "GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Pad: " + strings.Repeat("a", 4*observe.MaxHeaderBytes) + "\r\n", "HTTP/1.1 431"},
		{"many headers", "GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("a", 1024)+"\r\n", 64), "HTTP/1.1 431"},
		{"a scraper's request", "GET /healthz HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Prometheus/3.0.0\r\nAccept: text/plain\r\n", "HTTP/1.1 200"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			answer, _ := observetest.Exchange(t, s.Addr().String(), tt.req+"Connection: close\r\n\r\n")
			if !strings.HasPrefix(answer, tt.want) {
				t.Fatalf("answer %.80q; want %s", answer, tt.want)
			}
		})
	}
}

// listening runs a server on a loopback port until the test ends.
func listening(t *testing.T) *observe.Server {
	t.Helper()
	s := observe.NewServer("127.0.0.1:0", observe.NewRegistry(), nil)
	ran := make(chan error, 1)
	go func() { ran <- s.Run(t.Context()) }()
	waitListening(t, s, ran)
	return s
}

// waitListening waits until s listens; its Run, reporting on ran, must
// not return first.
func waitListening(t *testing.T, s *observe.Server, ran <-chan error) {
	t.Helper()
	select {
	case <-s.Listening():
	case err := <-ran:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not listening after 10s")
	}
}
