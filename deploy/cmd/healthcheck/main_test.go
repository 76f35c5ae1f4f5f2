package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.Write([]byte("ok\n"))
		case "/readyz":
			http.Error(w, "not ready: nats: no servers available", http.StatusServiceUnavailable)
		case "/slow":
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	tests := []struct {
		name    string
		url     string
		wantErr string // empty: healthy
	}{
		{"healthy", srv.URL + "/healthz", ""},
		{"unavailable", srv.URL + "/readyz", "503 Service Unavailable: not ready: nats"},
		{"not found", srv.URL + "/nope", "404"},
		{"timeout", srv.URL + "/slow", "deadline exceeded"},
		{"refused", "http://127.0.0.1:1/healthz", "connect"},
		{"bad url", "http://[::1", "missing ']'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			err := probe(ctx, tt.url)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("probe(%s) = %v, want healthy", tt.url, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("probe(%s) = %v, want error containing %q", tt.url, err, tt.wantErr)
			}
		})
	}
}
