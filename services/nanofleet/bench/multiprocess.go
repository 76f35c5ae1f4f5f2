package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/fleetdir"
	"github.com/nanofleet/nanofleet/pkg/svc"
)

// cluster is a multi-process fleet: a nats-server process, a tool-runner
// process and agent-worker processes, each its own binary.
type cluster struct {
	url     string
	nats    *proc
	runner  *proc
	workers []*proc
	// consolidator runs only when startConsolidator was called.
	consolidator *proc
}

func (c *cluster) procs() []*proc {
	var all []*proc
	for _, p := range append(append([]*proc{c.nats, c.runner}, c.workers...), c.consolidator) {
		if p != nil {
			all = append(all, p)
		}
	}
	return all
}

// stop kills every process, workers first.
func (c *cluster) stop() {
	all := c.procs()
	for i := len(all) - 1; i >= 0; i-- {
		all[i].Kill()
	}
}

// startNATS runs a nats-server process with JetStream in dir.
func startNATS(ctx context.Context, bins binaries, dir string) (*proc, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	p, err := startProc("nats-server", bins.path("nats-server"), nil, "-js", "-sd", dir, "-a", "127.0.0.1", "-p", fmt.Sprint(port))
	if err != nil {
		return nil, "", err
	}
	if err := p.waitOutput(ctx, "Server is ready", 30*time.Second); err != nil {
		p.Kill()
		return nil, "", err
	}
	return p, fmt.Sprintf("nats://127.0.0.1:%d", port), nil
}

// startCluster starts NATS, one tool runner and n workers, and waits
// until each says it is running.
func startCluster(ctx context.Context, bins binaries, dir, cfgPath, ws string, n int) (*cluster, error) {
	c := &cluster{}
	ok := false
	defer func() {
		if !ok {
			c.stop()
		}
	}()
	var err error
	if c.nats, c.url, err = startNATS(ctx, bins, filepath.Join(dir, "nats")); err != nil {
		return nil, err
	}
	common := []string{"--nats", c.url, "--config", cfgPath, "--http", "", "--log-level", "info", "--workspace", ws}
	if c.runner, err = startProc("tool-runner", bins.path("tool-runner"), nil, common...); err != nil {
		return nil, err
	}
	if err := c.runner.waitOutput(ctx, "tool-runner running", time.Minute); err != nil {
		return nil, err
	}
	for i := range n {
		w, err := startProc(fmt.Sprint("agent-worker-", i), bins.path("agent-worker"), nil, append(common, "--id", fmt.Sprint("w", i))...)
		if err != nil {
			return nil, err
		}
		c.workers = append(c.workers, w)
	}
	for _, w := range c.workers {
		if err := w.waitOutput(ctx, "agent-worker running", time.Minute); err != nil {
			return nil, err
		}
	}
	ok = true
	return c, nil
}

// startConsolidator adds a memory-consolidator process to the cluster
// and waits until it says it is running; stop kills it first.
func (c *cluster) startConsolidator(ctx context.Context, bins binaries, cfgPath string) error {
	p, err := startProc("memory-consolidator", bins.path("memory-consolidator"), nil,
		"--nats", c.url, "--config", cfgPath, "--http", "", "--log-level", "info", "--id", "bench")
	if err != nil {
		return err
	}
	c.consolidator = p
	return p.waitOutput(ctx, "memory-consolidator running", time.Minute)
}

// multiProcess runs sc against a multi-process fleet with sc.workers
// agent-worker processes.
func (r *driver) multiProcess(ctx context.Context, sc scenario) (Result, error) {
	bins, err := r.binaries(ctx)
	if err != nil {
		return Result{}, err
	}
	bed, err := r.scenarioBed("mp-", sc)
	if err != nil {
		return Result{}, err
	}
	defer bed.close()
	cl, err := startCluster(ctx, bins, bed.dir, bed.cfgPath, bed.ws, sc.workers)
	if err != nil {
		return Result{}, err
	}
	defer cl.stop()
	c, closeClient, err := connect(ctx, cl.url, bed.file)
	if err != nil {
		return Result{}, err
	}
	defer closeClient()
	turn := fleetTurn(c)
	if err := warmUp(ctx, turn, sc); err != nil {
		return Result{}, errors.Join(err, workerLogs(cl))
	}
	procs := cl.procs()
	pids := []int{os.Getpid()}
	for _, p := range procs {
		pids = append(pids, p.Pid())
	}
	meter := startCPU(pids...)
	s := sc.load.run(ctx, turn)
	cpu, other := meter.stop()
	res := r.result(sc, s, other)
	for i, p := range procs {
		peak, _ := memKB(p.Pid(), "VmHWM")
		res.Procs = append(res.Procs, procStat(p.Name, peak, cpu[i+1], s.Elapsed))
	}
	// The bench process's peak RSS is left out: it holds earlier
	// scenarios' garbage too.
	res.Procs = append(res.Procs, procStat("bench process (load + fake model)", 0, cpu[0], s.Elapsed))
	return res, nil
}

// allInOneBinary runs sc against the `nanofleet run` binary: the
// all-in-one as users run it, in its own process, driven over NATS.
func (r *driver) allInOneBinary(ctx context.Context, sc scenario) (Result, error) {
	bins, err := r.binaries(ctx)
	if err != nil {
		return Result{}, err
	}
	port, err := freePort()
	if err != nil {
		return Result{}, err
	}
	fs := fleetSettings{slots: sc.slots, limit: sc.limit, natsPort: port}
	if sc.shipped {
		fs.slots, fs.limit = 0, 0
	}
	bed, err := r.newBed("aiobin-", sc.latency, sc.tool, fs)
	if err != nil {
		return Result{}, err
	}
	defer bed.close()
	aio, err := startAllInOne(ctx, bins, bed.dir, bed.cfgPath, bed.ws)
	if err != nil {
		return Result{}, err
	}
	defer aio.Kill()
	url, err := allInOneURL(ctx, bed.dir)
	if err != nil {
		return Result{}, err
	}
	c, closeClient, err := connect(ctx, url, bed.file)
	if err != nil {
		return Result{}, err
	}
	defer closeClient()
	turn := fleetTurn(c)
	if err := warmUp(ctx, turn, sc); err != nil {
		return Result{}, fmt.Errorf("%w\n%s", err, aio.Tail(4000))
	}
	meter := startCPU(os.Getpid(), aio.Pid())
	s := sc.load.run(ctx, turn)
	cpu, other := meter.stop()
	res := r.result(sc, s, other)
	peak, _ := memKB(aio.Pid(), "VmHWM")
	res.Procs = []ProcStat{
		procStat("nanofleet (all-in-one)", peak, cpu[1], s.Elapsed),
		procStat("bench process (load + fake model)", 0, cpu[0], s.Elapsed),
	}
	return res, nil
}

// dial connects the load generator to an external NATS and provisions
// the same layout as the fleet (so nothing is changed).
// allInOneURL is the NATS URL, with credentials, of the all-in-one that
// [startAllInOne] started under dir.
func allInOneURL(ctx context.Context, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := fleetdir.Find(ctx, filepath.Join(dir, "data"))
	if err != nil {
		return "", err
	}
	return r.URL()
}

func dial(ctx context.Context, url string, file *config.File) (*bus.Bus, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: url, Name: "bench"})
	if err != nil {
		return nil, err
	}
	if err := bus.Provision(ctx, b, svc.Layout(file)); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// workerLogs returns the last output of the workers, for a failure.
func workerLogs(c *cluster) error {
	var errs []error
	for _, p := range c.procs() {
		errs = append(errs, fmt.Errorf("--- %s:\n%s", p.Name, p.Tail(4000)))
	}
	return errors.Join(errs...)
}
