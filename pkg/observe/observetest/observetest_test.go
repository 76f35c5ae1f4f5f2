package observetest_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nanofleet/nanofleet/pkg/observe/observetest"
)

func TestGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x_bytes", Help: "x"})
	reg.MustRegister(g)
	for _, want := range []float64{0, 42.5} {
		g.Set(want)
		if got := observetest.Gauge(t, reg, "x_bytes"); got != want {
			t.Errorf("Gauge = %v, want %v", got, want)
		}
	}
}

func TestWalk(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/here" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, "hello there")
	}))
	defer srv.Close()
	before := false
	observetest.Walk(t, srv.URL, []observetest.Step{
		{Name: "found", Before: func() { before = true }, Path: "/here", WantCode: 200, WantBody: "there"},
		{Name: "not found", Path: "/gone", WantCode: 404, WantBody: "not found"},
	})
	if !before {
		t.Error("Before did not run")
	}
	if code, body := observetest.Get(t, srv.URL+"/here"); code != 200 || body != "hello there" {
		t.Errorf("Get = %d %q", code, body)
	}
}

func TestFirstLogged(t *testing.T) {
	log, first := observetest.FirstLogged("lost")
	log.Debug("started")
	log.Warn("consumer lost", "n", 1)
	log.Warn("consumer lost", "n", 2)
	select {
	case r := <-first:
		var n int64
		r.Attrs(func(a slog.Attr) bool { n = a.Value.Int64(); return false })
		if r.Message != "consumer lost" || n != 1 || r.Time.IsZero() {
			t.Errorf("first record = %q n=%d at %v, want the first \"consumer lost\", n=1, stamped", r.Message, n, r.Time)
		}
	case <-time.After(time.Second):
		t.Fatal("no record matched")
	}
	// The logger hands records over as they are logged: one logged after
	// the first was taken would be in the channel when Warn returns.
	log.Warn("consumer lost", "n", 3)
	select {
	case r := <-first:
		t.Errorf("a later record %q came through, want only the first", r.Message)
	default:
	}
}
