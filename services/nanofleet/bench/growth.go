package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// Shapes of the growth suite's fleets.
const (
	shapeAllInOne     = "all-in-one binary"
	shapeMultiProcess = "multi-process"
)

// settleAfterLoad is how long the growth suite lets the fleet idle before
// it reads RSS: the duplicate windows pass (their message ids are dropped
// with them), the server's block caches expire (10 s after the last
// write) and memtrim's trims after activity run (every 10 s for a minute).
func settleAfterLoad(window time.Duration) time.Duration {
	return window + 70*time.Second
}

// growth runs a fleet of the given shape, drives GrowthFirst turns and
// reads every process's RSS, then the remaining turns over the remaining
// sessions and reads it again. The fake model answers at once, so the load
// is as dense as the machine allows.
func (r *driver) growth(ctx context.Context, shape string) (*Growth, error) {
	c := r.cfg
	bins, err := r.binaries(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(r.tmp, "growth-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	model, err := startModel(0, false)
	if err != nil {
		return nil, err
	}
	defer model.Close()
	ws, err := prepareWorkspace(dir)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cfgPath, file, err := fleetSettings{modelURL: model.URL(), natsPort: port, windows: c.GrowthWindow}.write(dir)
	if err != nil {
		return nil, err
	}
	var (
		procs []*proc
		url   string
	)
	switch shape {
	case shapeAllInOne:
		aio, err := startAllInOne(ctx, bins, dir, cfgPath, ws)
		if err != nil {
			return nil, err
		}
		defer aio.kill()
		procs = []*proc{aio}
		if url, err = allInOneURL(ctx, dir); err != nil {
			return nil, err
		}
	case shapeMultiProcess:
		cl, err := startCluster(ctx, bins, dir, cfgPath, ws, 1)
		if err != nil {
			return nil, err
		}
		defer cl.stop()
		procs, url = cl.procs(), cl.url
	default:
		return nil, fmt.Errorf("unknown growth shape %q", shape)
	}
	b, err := dial(ctx, url, file)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	cl, err := fleet.NewClient(ctx, b, "bench")
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	turn := fleetTurn(cl)

	perChat := max(1, c.GrowthTurns/c.GrowthSessions)
	firstChats := max(1, c.GrowthFirst/perChat)
	g := &Growth{Shape: shape, Sessions: c.GrowthSessions, Concurrency: c.GrowthConcurrency, SettleS: settleAfterLoad(c.GrowthWindow).Seconds()}
	samplers := make([]*rssSampler, len(procs))
	pids := []int{os.Getpid()}
	for i, p := range procs {
		samplers[i] = &rssSampler{}
		stop := samplers[i].start(ctx, p.pid(), time.Second)
		defer stop()
		pids = append(pids, p.pid())
	}
	readAll := func() ([]float64, error) {
		out := make([]float64, len(procs))
		for i, p := range procs {
			kb, err := memKB(p.pid(), "VmRSS")
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
			out[i] = mb(kb)
		}
		return out, nil
	}

	meter := startCPU(pids...)
	first := load{Concurrency: c.GrowthConcurrency, Chats: firstChats, TurnsPerChat: perChat, Prefix: "g1"}
	s1 := first.run(ctx, turn)
	sleep(ctx, settleAfterLoad(c.GrowthWindow))
	rss1, err := readAll()
	if err != nil {
		return nil, err
	}
	r.logf("  growth (%s): %d turns over %d sessions: RSS %v MB", shape, len(s1.Latencies), firstChats, rss1)
	rest := load{Concurrency: c.GrowthConcurrency, Chats: max(1, c.GrowthSessions-firstChats), TurnsPerChat: perChat, Prefix: "g2"}
	s2 := rest.run(ctx, turn)
	sleep(ctx, settleAfterLoad(c.GrowthWindow))
	rss2, err := readAll()
	if err != nil {
		return nil, err
	}
	_, g.OtherCPUPercent = meter.stop()
	for i, p := range procs {
		peak, _ := memKB(p.pid(), "VmHWM")
		g.Procs = append(g.Procs, GrowthProc{
			Name: p.name, Service: p.name != "nats-server",
			RSSFirstMB: rss1[i], RSSAllMB: rss2[i], PeakRSSMB: mb(peak), Ratio: rss2[i] / rss1[i],
			RSSSamplesMB: samplers[i].values(),
		})
	}
	g.FirstTurns = len(s1.Latencies)
	g.Turns = len(s1.Latencies) + len(s2.Latencies)
	g.Sessions = firstChats + rest.Chats
	g.Errors = s1.Errors + s2.Errors
	if err := firstErr(s1.FirstErr, s2.FirstErr); err != nil {
		g.FirstError = err.Error()
	}
	g.ElapsedS = (s1.Elapsed + s2.Elapsed).Seconds()
	g.TurnsPerS = float64(g.Turns) / g.ElapsedS
	g.StoreMB = float64(dirSize(dir)) / (1 << 20)
	for _, p := range g.Procs {
		r.logf("  growth (%s): %d turns over %d sessions: %s RSS %.1f MB (%.2f× the first), peak %.1f MB",
			shape, g.Turns, g.Sessions, p.Name, p.RSSAllMB, p.Ratio, p.PeakRSSMB)
	}
	r.logf("  growth (%s): %.0f turns/s, store %.0f MB", shape, g.TurnsPerS, g.StoreMB)
	return g, nil
}
