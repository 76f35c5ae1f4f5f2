package runner_test

import (
	"slices"
	"testing"
	"time"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// BenchmarkReadFileRoundTrip measures a small read_file call from a
// worker's client through NATS to the runner and back, reporting the
// median and 99th percentile besides the mean.
func BenchmarkReadFileRoundTrip(b *testing.B) {
	f := start(b, nil)
	expectOK(b, f.call("write_file", map[string]any{"path": "small.txt", "content": "hello\nworld\n"}))
	req := &nanofleetv1.ToolRequest{CallId: "bench", Name: "read_file", ArgumentsJson: `{"path":"small.txt"}`, SessionKey: "bench:1"}
	ctx := b.Context()
	// Warm up the catalog cache, connections and the workspace.
	for range 50 {
		if _, err := f.client.Call(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		res, err := f.client.Call(ctx, req)
		lat = append(lat, time.Since(start))
		if err != nil || res.GetIsError() {
			b.Fatalf("%v %v", err, res)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Nanoseconds()) }
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
}
