package bench

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nanofleet/nanofleet/pkg/backoff"
)

// idle starts each service binary against a nats-server process, and then
// the all-in-one on its own, lets each settle and reads its RSS.
func (r *driver) idle(ctx context.Context) ([]IdleRSS, error) {
	bins, err := r.binaries(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(r.tmp, "idle-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ws, err := prepareWorkspace(dir)
	if err != nil {
		return nil, err
	}
	// No model is called; the provider just has to be configured.
	cfgPath, _, err := fleetSettings{modelURL: "http://127.0.0.1:9/v1"}.write(dir)
	if err != nil {
		return nil, err
	}
	nats, url, err := startNATS(ctx, bins, filepath.Join(dir, "nats"))
	if err != nil {
		return nil, err
	}
	defer nats.Kill()
	gwPort, err := freePort()
	if err != nil {
		return nil, err
	}
	common := []string{"--nats", url, "--config", cfgPath, "--http", ""}
	services := []struct {
		name, ready string
		args        []string
	}{
		{"agent-worker", "agent-worker running", append(common, "--log-level", "info", "--workspace", ws, "--id", "idle")},
		{"tool-runner", "tool-runner running", append(common, "--log-level", "info", "--workspace", ws)},
		{"memory-consolidator", "memory-consolidator running", append(common, "--log-level", "info", "--id", "idle")},
		{"channel-gateway", "channel-gateway running", append(common, "--listen", fmt.Sprintf("127.0.0.1:%d", gwPort))},
	}
	var out []IdleRSS
	var started []*proc
	defer func() {
		for _, p := range started {
			p.Kill()
		}
	}()
	for _, s := range services {
		p, err := startProc(s.name, bins.path(s.name), []string{"HOME=" + dir}, s.args...)
		if err != nil {
			return nil, err
		}
		started = append(started, p)
		if err := p.waitOutput(ctx, s.ready, time.Minute); err != nil {
			r.fail("idle RSS of %s: %v", s.name, err)
			continue
		}
	}
	_ = backoff.Sleep(ctx, r.cfg.Settle)
	for _, p := range append([]*proc{nats}, started...) {
		kb, err := memKB(p.Pid(), "VmRSS")
		if err != nil {
			continue // failed to start: reported above
		}
		note := ""
		if p == nats {
			note = "JetStream with the fleet's streams and buckets, no messages"
		}
		out = append(out, IdleRSS{Name: p.Name, RSSMB: mb(kb), Note: note})
	}
	for _, p := range started {
		p.Kill()
	}
	nats.Kill()

	// The all-in-one: embedded NATS, tool runner, worker, consolidator.
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	aioDir := filepath.Join(dir, "aio")
	if err := os.MkdirAll(aioDir, 0o755); err != nil {
		return nil, err
	}
	aioCfg, _, err := fleetSettings{modelURL: "http://127.0.0.1:9/v1", natsPort: port}.write(aioDir)
	if err != nil {
		return nil, err
	}
	aio, err := startAllInOne(ctx, bins, aioDir, aioCfg, ws)
	if err != nil {
		return nil, err
	}
	defer aio.Kill()
	_ = backoff.Sleep(ctx, r.cfg.Settle)
	kb, err := memKB(aio.Pid(), "VmRSS")
	if err != nil {
		return nil, err
	}
	out = append(out, IdleRSS{Name: "nanofleet (all-in-one)", RSSMB: mb(kb), Note: "`nanofleet run`: embedded NATS, tool runner, one worker, consolidator"})
	for _, m := range out {
		r.logf("  idle %-24s %6.1f MB", m.Name, m.RSSMB)
	}
	return out, nil
}

// startAllInOne runs `nanofleet run` with its data under dir, its web
// channels on a port of the system's choosing (two benches may run at once).
func startAllInOne(ctx context.Context, bins binaries, dir, cfgPath, ws string) (*proc, error) {
	home := filepath.Join(dir, "home")
	p, err := startProc("nanofleet", bins.path("nanofleet"), []string{"HOME=" + home, "NANOFLEET_HOME=" + home},
		"run", "--config", cfgPath, "--data", filepath.Join(dir, "data"), "--workspace", ws, "--http", "",
		"--listen", "127.0.0.1:0", "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	if err := p.waitOutput(ctx, "nanofleet is running", time.Minute); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// dirSize is the total size of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
