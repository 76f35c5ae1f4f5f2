// Package observetest reads metrics and the operator routes back in
// tests.
package observetest

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Gauge is the value of the gauge name (its first series) that g
// gathers; the test fails if there is none.
func Gauge(t testing.TB, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// Step is one request of [Walk]: Before (if any) runs first, then GET
// Path must answer WantCode with a body containing WantBody.
type Step struct {
	Name     string
	Before   func()
	Path     string
	WantCode int
	WantBody string
}

// Walk makes the steps' requests to base in order and fails the test at
// the first unexpected answer.
func Walk(t testing.TB, base string, steps []Step) {
	t.Helper()
	for _, st := range steps {
		if st.Before != nil {
			st.Before()
		}
		code, body := Get(t, base+st.Path)
		if code != st.WantCode || !strings.Contains(body, st.WantBody) {
			t.Fatalf("%s: GET %s = %d %q, want %d containing %q", st.Name, st.Path, code, body, st.WantCode, st.WantBody)
		}
	}
}

// Get returns the status and body of GET url; the test fails if the
// request does.
func Get(t testing.TB, url string) (int, string) {
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

// Exchange sends req, raw bytes of HTTP, on a new connection to addr and
// returns what the server answered until it closed the connection, and
// the read's error (a deadline of 30 s: a server that never closes fails
// the read, not the test). The request is written beside the read: a
// server may answer and close before it has read all of a large one.
func Exchange(t testing.TB, addr, req string) (string, error) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.WriteString(conn, req) }()
	answer, err := io.ReadAll(conn)
	return string(answer), err
}
