package fleet_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet/fleettest"
)

// BenchmarkTurns drives the all-in-one (embedded NATS, one worker, fake
// model at zero latency) with 1 and with 100 concurrent sessions and
// reports turns/s and the latency from inbound publish to final reply.
// model_ms is the mean model call as the worker measured it, so that
// latency minus model time is what the bus and the turn protocol cost.
// Each client moves to a new session every 20 turns, as conversations
// are consolidated long before they reach thousands of turns.
func BenchmarkTurns(b *testing.B) {
	for _, c := range []struct{ sessions, slots int }{{1, 16}, {100, 16}, {100, 64}} {
		sessions := c.sessions
		b.Run(fmt.Sprintf("sessions=%d/slots=%d", c.sessions, c.slots), func(b *testing.B) {
			llm := llmtest.NewServer(b, llmtest.WithMaxRecorded(1))
			tf := startFleetWith(b, llm, b.TempDir(), b.TempDir(), 1, map[string]any{
				"worker": map[string]any{"ackWaitSeconds": 3, "turnsPerWorker": c.slots},
			})
			ctx := b.Context()
			// Warm up: connections, consumers, caches.
			for i := range 20 {
				if _, err := tf.client.Ask(ctx, fleet.Request{ChatID: "warm", Text: strconv.Itoa(i)}); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			var mu sync.Mutex
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			per := (b.N + sessions - 1) / sessions
			for s := range sessions {
				wg.Add(1)
				go func() {
					defer wg.Done()
					local := make([]time.Duration, 0, per)
					for i := range per {
						t0 := time.Now()
						if _, err := tf.client.Ask(ctx, fleet.Request{ChatID: fmt.Sprintf("b%d-%d", s, i/20), Text: strconv.Itoa(i)}); err != nil {
							b.Error(err)
							return
						}
						local = append(local, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, local...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "turns/s")
			b.ReportMetric(ms(lat[len(lat)/2]), "p50_ms")
			b.ReportMetric(ms(lat[len(lat)*99/100]), "p99_ms")
			if sum, n := modelTime(tf); n > 0 {
				b.ReportMetric(sum/float64(n)*1000, "model_ms")
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// modelTime returns the total seconds and count of model calls observed.
func modelTime(tf *testFleet) (float64, uint64) {
	mfs, err := tf.Registry.Gather()
	if err != nil {
		return 0, 0
	}
	var sum float64
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != "nanofleet_model_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetHistogram().GetSampleSum()
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return sum, n
}

// BenchmarkIdleRSS starts the all-in-one binary, lets it settle, and
// reports its resident memory.
func BenchmarkIdleRSS(b *testing.B) {
	bins := fleettest.Build(b, "nanofleet")
	home := b.TempDir()
	cfg := fleettest.WriteConfig(b, map[string]any{"nats": map[string]any{"port": -1}})
	for range b.N {
		p := fleettest.Start(b, "nanofleet", bins.Path("nanofleet"), []string{"NANOFLEET_HOME=" + home},
			"run", "--config", cfg, "--data", home+"/data", "--workspace", home+"/ws", "--http", "", "--log-level", "warn")
		p.WaitOutput(b, "nanofleet is running", 30*time.Second)
		time.Sleep(3 * time.Second) // idle: let start-up garbage be collected
		b.ReportMetric(rssMB(b, p.Pid()), "idle_rss_MB")
		p.Kill()
	}
}

// rssMB reads VmRSS of pid.
func rssMB(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
