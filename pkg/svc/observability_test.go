package svc_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/svc"
)

// TestObservabilityDrains: the server answers once Observability returns,
// reports not ready once the service's context ends (it drains) while
// staying alive, and stops on stop.
func TestObservabilityDrains(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, drain := context.WithCancel(t.Context())
	defer drain()
	stop, err := svc.Observability(ctx, addr, observe.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	steps := []struct {
		name     string
		before   func()
		path     string
		wantCode int
		wantBody string
	}{
		{"alive", nil, "/healthz", 200, "ok"},
		{"ready", nil, "/readyz", 200, "ready"},
		{"draining is not ready", drain, "/readyz", 503, "draining: context canceled"},
		{"draining is alive", nil, "/healthz", 200, "ok"},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		code, body := httpGet(t, "http://"+addr+st.path)
		if code != st.wantCode || !strings.Contains(body, st.wantBody) {
			t.Fatalf("%s: GET %s = %d %q, want %d containing %q", st.name, st.path, code, body, st.wantCode, st.wantBody)
		}
	}
	stop()
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Fatal("server still answers after stop")
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
