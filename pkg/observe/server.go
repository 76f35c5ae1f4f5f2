package observe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ReadyTimeout bounds one call of the readiness function.
const ReadyTimeout = 5 * time.Second

// ShutdownTimeout bounds the wait for requests in flight once
// [Server.Run]'s context has ended.
const ShutdownTimeout = 5 * time.Second

// MaxHeaderBytes bounds a request's header. Scrapers and probes send
// well under a kilobyte; net/http's default, 1 MB, let anyone who reaches
// the port make the process hold a megabyte per connection: 1,000
// connections took the all-in-one from 489 MB to 1.5 GB RSS.
const MaxHeaderBytes = 16 << 10

// Server serves /metrics, /healthz and /readyz on one address.
type Server struct {
	addr      string
	ready     func(context.Context) error
	srv       *http.Server
	listening chan struct{} // closed once Run has bound its listener
	started   atomic.Bool

	mu sync.Mutex // guards ln
	ln net.Listener
}

// NewServer returns a server for addr (host:port; ":0" picks a free port)
// that exposes reg on /metrics and reports ready when ready returns nil.
// A nil reg serves an empty registry; a nil ready is always ready.
func NewServer(addr string, reg *prometheus.Registry, ready func(ctx context.Context) error) *Server {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if ready == nil {
		ready = func(context.Context) error { return nil }
	}
	s := &Server{addr: addr, ready: ready, listening: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		Timeout:           ReadyTimeout,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", s.serveReady)
	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// The routes take no body, but net/http reads what a handler
		// left unread before it answers: without a deadline, a request
		// declaring a body it never sends held its connection for good.
		ReadTimeout:    10 * time.Second,
		IdleTimeout:    time.Minute,
		MaxHeaderBytes: MaxHeaderBytes,
	}
	return s
}

// Handler returns the server's routes, for tests and for mounting them on
// another server.
func (s *Server) Handler() http.Handler { return s.srv.Handler }

// Run listens on the server's address and serves until ctx ends; then it
// stops accepting connections, waits up to [ShutdownTimeout] for requests
// in flight, and returns. A port that is taken fails at once;
// [Server.Listening] is closed once the listener is bound. It returns an
// error if serving failed. A server runs once: a second Run returns
// [ErrStarted].
func (s *Server) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return ErrStarted
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("observe: listen %s: %w", s.addr, err)
	}
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	// Requests are not cancelled when ctx ends: the shutdown lets those in
	// flight finish.
	s.srv.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	close(s.listening)

	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("observe: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("observe: shutdown: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("observe: serve: %w", err)
	}
	return nil
}

// Listening is closed once [Server.Run] has bound its listener.
func (s *Server) Listening() <-chan struct{} { return s.listening }

// Addr returns the address the server listens on, or nil before
// [Server.Run] has bound it.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		writeText(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
		return
	}
	writeText(w, http.StatusOK, "ready")
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, body)
}

// NewRegistry returns a registry holding the Go runtime and process
// collectors, the usual base for a service's [Metrics].
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}
