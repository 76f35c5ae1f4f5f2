package observetest_test

import (
	"testing"

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
