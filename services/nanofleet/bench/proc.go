package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/services/nanofleet/internal/procgroup"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpuTime is the CPU time (user + system) pid has used so far.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields are counted
	// after its closing parenthesis. utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// memKB reads a "Vm…" line (VmRSS, VmHWM) of /proc/<pid>/status, in KiB.
func memKB(pid int, field string) (int64, error) {
	return memKB0(fmt.Sprintf("/proc/%d/status", pid), field)
}

// resetPeak resets VmHWM of pid to its current RSS (Linux clear_refs 5).
func resetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// mb converts KiB to MiB.
func mb(kb int64) float64 { return float64(kb) / 1024 }

// proc is a child process: one service of a multi-process fleet.
type proc struct{ *procgroup.Proc }

// startProc runs bin with args in its own process group, with env added
// to a minimal environment.
func startProc(name, bin string, env []string, args ...string) (*proc, error) {
	p, err := procgroup.Start(name, bin, append([]string{"HOME=" + os.TempDir()}, env...), 1<<20, args...) // the first 1 MiB
	if err != nil {
		return nil, err
	}
	return &proc{p}, nil
}

// waitOutput waits until the process printed s.
func (p *proc) waitOutput(ctx context.Context, s string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	switch err := p.WaitPrinted(ctx, s); {
	case errors.Is(err, procgroup.ErrExited):
		return fmt.Errorf("%s exited before printing %q:\n%s", p.Name, s, p.Tail(4000))
	case err != nil:
		return fmt.Errorf("%s did not print %q within %s:\n%s", p.Name, s, d, p.Tail(4000))
	}
	return nil
}

// binaries are the service binaries a bench run starts.
type binaries struct{ dir string }

func (b binaries) path(name string) string { return filepath.Join(b.dir, name) }

// buildBinaries compiles the named services of the go.work workspace at
// root (and nats-server from the module cache) into dir, as `make build`
// does (static, trimmed).
func buildBinaries(ctx context.Context, root, dir string, services ...string) (binaries, error) {
	for _, s := range services {
		pkg := "github.com/nanofleet/nanofleet/services/" + s
		if s == "nats-server" {
			pkg = "github.com/nats-io/nats-server/v2"
		}
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, s), pkg)
		cmd.Dir = filepath.Join(root, "services", "nanofleet")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return binaries{}, fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	}
	return binaries{dir: dir}, nil
}

// machineBusy is the CPU time all processes of the machine have used so
// far (the busy columns of /proc/stat's cpu line), for telling how much of
// the machine others used while a scenario ran.
func machineBusy() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / clockTicks, nil
}

// cpuMeter measures the CPU time of a set of processes and of everything
// else on the machine over an interval.
type cpuMeter struct {
	pids    []int
	own0    []time.Duration
	busy0   time.Duration
	started time.Time
}

func startCPU(pids ...int) *cpuMeter {
	m := &cpuMeter{pids: pids, own0: make([]time.Duration, len(pids)), started: time.Now()}
	for i, p := range pids {
		m.own0[i], _ = cpuTime(p)
	}
	m.busy0, _ = machineBusy()
	return m
}

// stop returns each process's CPU time since start and the CPU time the
// rest of the machine used, as a percentage of one core.
func (m *cpuMeter) stop() (own []time.Duration, otherPct float64) {
	busy, _ := machineBusy()
	elapsed := time.Since(m.started)
	var total time.Duration
	own = make([]time.Duration, len(m.pids))
	for i, p := range m.pids {
		c, _ := cpuTime(p)
		own[i] = c - m.own0[i]
		total += own[i]
	}
	other := busy - m.busy0 - total
	return own, max(0, 100*other.Seconds()/elapsed.Seconds())
}
