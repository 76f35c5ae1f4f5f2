package llmtest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
)

// NewStandalone starts a server on 127.0.0.1 outside any test, for load
// generators such as `nanofleet bench`. It behaves as [NewServer]; the
// caller must Close it.
func NewStandalone(opts ...Option) (*Server, error) {
	set := settings{maxRecorded: -1, models: []string{"llmtest"}}
	for _, o := range opts {
		o(&set)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("llmtest: listen: %w", err)
	}
	s := &Server{set: set, done: make(chan struct{}), script: Echo}
	s.ts = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(s.serveHTTP)}}
	s.ts.Start()
	return s, nil
}
