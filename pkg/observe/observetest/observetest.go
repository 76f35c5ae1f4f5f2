// Package observetest reads metrics back in tests.
package observetest

import (
	"testing"

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
