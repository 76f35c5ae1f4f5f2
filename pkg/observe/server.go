package observe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ReadyTimeout bounds one call of the readiness function.
const ReadyTimeout = 5 * time.Second

// Server serves /metrics, /healthz and /readyz on one address.
type Server struct {
	addr  string
	ready func(context.Context) error
	srv   *http.Server

	mu      sync.Mutex
	started bool
	ln      net.Listener
	served  chan error // receives Serve's result once
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
	s := &Server{addr: addr, ready: ready}
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
		IdleTimeout:       time.Minute,
	}
	return s
}

// Handler returns the server's routes, for tests and for mounting them on
// another server.
func (s *Server) Handler() http.Handler { return s.srv.Handler }

// Start listens on the server's address and serves in the background until
// [Server.Shutdown]. It returns once the listener is bound, so a port that
// is taken fails here. ctx is the parent of every request's context: cancel
// it to make /readyz report 503 while the service drains.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("observe: listen %s: %w", s.addr, err)
	}
	s.started = true
	s.ln = ln
	s.served = make(chan error, 1)
	s.srv.BaseContext = func(net.Listener) context.Context { return ctx }
	go func() { s.served <- s.srv.Serve(ln) }()
	return nil
}

// Addr returns the address the server listens on, or nil before
// [Server.Start].
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown stops accepting connections and waits, until ctx is done, for
// requests in flight to finish. It returns an error if serving had failed.
// Calling it on a server that never started does nothing.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	started, served := s.started, s.served
	s.mu.Unlock()
	if !started {
		return nil
	}
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("observe: shutdown: %w", err)
	}
	select {
	case err := <-served:
		served <- http.ErrServerClosed // later calls see a clean close
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("observe: serve: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("observe: shutdown: %w", ctx.Err())
	}
}

func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
	defer cancel()
	err := ctx.Err() // the service is draining: not ready, whatever ready says
	if err == nil {
		err = s.ready(ctx)
	}
	if err != nil {
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
