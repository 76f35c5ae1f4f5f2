package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// OneShot is what `nanofleet agent -m` cost in one mode: the wall time
// from start to exit and the process's peak RSS, over Runs runs.
type OneShot struct {
	// Mode: "cold, new home" (no fleet runs; the process starts an
	// embedded NATS server and the fleet, on an empty data directory),
	// "cold, existing home" (the same on a data directory an earlier run
	// left), or "joining a running fleet" (--nats).
	Mode string `json:"mode"`
	Runs int    `json:"runs"`
	// Medians and maxima over the runs.
	WallMsP50     float64 `json:"wall_ms_p50"`
	WallMsMax     float64 `json:"wall_ms_max"`
	PeakRSSMBP50  float64 `json:"peak_rss_mb_p50"`
	PeakRSSMBMax  float64 `json:"peak_rss_mb_max"`
	CPUMsP50      float64 `json:"cpu_ms_p50"`
	FirstError    string  `json:"first_error,omitempty"`
	OtherCPUPct   float64 `json:"other_cpu_pct"`
	FailedRunsCnt int     `json:"failed_runs"`
}

// Modes of the one-shot suite.
const (
	OneShotColdNew   = "cold, new home"
	OneShotColdAgain = "cold, existing home"
	OneShotJoin      = "joining a running fleet"
)

// oneShot runs `nanofleet agent -m` against a 0 ms model in each mode.
func (r *driver) oneShot(ctx context.Context) ([]OneShot, error) {
	bins, err := r.binaries(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(r.tmp, "oneshot-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	model, err := startModel(0, false)
	if err != nil {
		return nil, err
	}
	defer model.Close()
	env := func(home string) []string {
		return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "NANOFLEET_HOME=" + home,
			"OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=bench"}
	}
	var out []OneShot

	// Cold, each run in a new home; then again in the last home.
	homes := make([]string, r.cfg.OneShotRuns)
	for i := range homes {
		homes[i] = filepath.Join(dir, fmt.Sprintf("home-%d", i))
	}
	out = append(out, r.oneShotRuns(ctx, bins.path("nanofleet"), OneShotColdNew, func(i int) ([]string, []string) {
		return env(homes[i]), []string{"agent", "-m", "hello"}
	}))
	out = append(out, r.oneShotRuns(ctx, bins.path("nanofleet"), OneShotColdAgain, func(int) ([]string, []string) {
		return env(homes[0]), []string{"agent", "-m", "hello again"}
	}))

	// Joining the all-in-one binary, started once.
	ws, err := prepareWorkspace(dir)
	if err != nil {
		return out, err
	}
	port, err := freePort()
	if err != nil {
		return out, err
	}
	cfgPath, _, err := fleetSettings{modelURL: model.URL(), natsPort: port}.write(dir)
	if err != nil {
		return out, err
	}
	aio, err := startAllInOne(ctx, bins, dir, cfgPath, ws)
	if err != nil {
		return out, err
	}
	defer aio.Kill()
	url, err := allInOneURL(ctx, dir)
	if err != nil {
		return out, err
	}
	joinHome := filepath.Join(dir, "join-home")
	out = append(out, r.oneShotRuns(ctx, bins.path("nanofleet"), OneShotJoin, func(int) ([]string, []string) {
		return env(joinHome), []string{"agent", "--config", cfgPath, "--nats", url, "-m", "hello"}
	}))
	return out, nil
}

// oneShotRuns runs the binary OneShotRuns times with what args gives for
// each run.
func (r *driver) oneShotRuns(ctx context.Context, bin, mode string, args func(i int) (env, argv []string)) OneShot {
	res := OneShot{Mode: mode}
	var walls, rss, cpus []float64
	meter := startCPU(os.Getpid())
	for i := range r.cfg.OneShotRuns {
		env, argv := args(i)
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		cmd := exec.CommandContext(rctx, bin, argv...)
		cmd.Env = env
		var outBuf strings.Builder
		cmd.Stdout, cmd.Stderr = &outBuf, &outBuf
		start := time.Now()
		err := cmd.Start()
		var peakKB int64
		if err == nil {
			// rusage's maxrss of a child started with vfork counts the
			// parent's memory, so VmHWM is read while the child runs,
			// every 5 ms until it exits (it only grows).
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				t := time.NewTicker(5 * time.Millisecond)
				defer t.Stop()
				for {
					if kb, err := memKB(cmd.Process.Pid, "VmHWM"); err == nil {
						peakKB = max(peakKB, kb)
					}
					select {
					case <-stop:
						return
					case <-t.C:
					}
				}
			}()
			err = cmd.Wait()
			close(stop)
			<-sampled
		}
		wall := time.Since(start)
		cancel()
		outb := []byte(outBuf.String())
		if err != nil || !strings.Contains(string(outb), "ok") {
			res.FailedRunsCnt++
			if res.FirstError == "" {
				res.FirstError = fmt.Sprintf("%v: %s", err, strings.TrimSpace(string(outb)))
			}
			continue
		}
		walls = append(walls, float64(wall.Microseconds())/1000)
		rss = append(rss, mb(peakKB))
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			cpus = append(cpus, float64(cpu.Microseconds())/1000)
		}
	}
	_, res.OtherCPUPct = meter.stop()
	res.Runs = len(walls)
	res.WallMsP50, res.WallMsMax = median(walls), maxOf(walls)
	res.PeakRSSMBP50, res.PeakRSSMBMax = median(rss), maxOf(rss)
	res.CPUMsP50 = median(cpus)
	r.logf("  one-shot %-26s wall p50 %7.1f ms max %7.1f ms  peak RSS p50 %5.1f MB  CPU p50 %6.1f ms  runs %d failed %d",
		mode, res.WallMsP50, res.WallMsMax, res.PeakRSSMBP50, res.CPUMsP50, res.Runs, res.FailedRunsCnt)
	return res
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func maxOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return slices.Max(v)
}
