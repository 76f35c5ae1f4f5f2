// Package fleettest runs nanofleet's real binaries as processes for tests:
// a nats-server built from the module, agent workers and tool runners, each
// killed by pid when the test ends.
package fleettest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/fleetdir"
	"github.com/nanofleet/nanofleet/services/nanofleet/internal/procgroup"
)

// Binaries builds the service binaries once into dir.
type Binaries struct {
	Dir string
}

// Build compiles each named service (e.g. "agent-worker") from the
// workspace into a temp dir.
func Build(t testing.TB, services ...string) *Binaries {
	t.Helper()
	dir := t.TempDir()
	for _, s := range services {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, s), "github.com/nanofleet/nanofleet/services/"+s)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", s, err, out)
		}
	}
	return &Binaries{Dir: dir}
}

// Path returns a built binary's path.
func (b *Binaries) Path(service string) string { return filepath.Join(b.Dir, service) }

// Proc is a started process.
type Proc struct{ *procgroup.Proc }

// Start runs bin with args and env added to a minimal environment; the
// process is killed by pid at the end of the test.
func Start(t testing.TB, name, bin string, env []string, args ...string) *Proc {
	t.Helper()
	p, err := procgroup.Start(name, bin, append([]string{"HOME=" + t.TempDir()}, env...), 4<<20, args...) // the first 4 MiB: enough to debug
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- output of %s:\n%s", name, p.Output())
		}
	})
	return &Proc{p}
}

// Wait waits for the process to exit, at most d.
func (p *Proc) Wait(d time.Duration) (exited bool, code int) {
	select {
	case <-p.Exited():
		return true, p.ExitCode()
	case <-time.After(d):
		return false, 0
	}
}

// WaitOutput waits until the process printed a line containing s.
func (p *Proc) WaitOutput(t testing.TB, s string, d time.Duration) {
	t.Helper()
	if err := p.AwaitOutput(t.Context(), s, d); err != nil {
		t.Fatal(err)
	}
}

// AwaitOutput is WaitOutput returning what went wrong: the process
// exited first, or d passed (or ctx ended); the error holds its output.
func (p *Proc) AwaitOutput(ctx context.Context, s string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	switch err := p.WaitPrinted(ctx, s); {
	case errors.Is(err, procgroup.ErrExited):
		return fmt.Errorf("%s exited before printing %q; output:\n%s", p.Name, s, p.Output())
	case err != nil:
		return fmt.Errorf("%s did not print %q within %s; output:\n%s", p.Name, s, d, p.Output())
	}
	return nil
}

// PortTaken reports whether the process failed to listen on a port
// another held. A port from [bustest.FreePort] is free when picked, not
// when the process binds it: a connection of another test may take it
// as its local port in between.
func (p *Proc) PortTaken() bool { return strings.Contains(p.Output(), "address already in use") }

// PortTries is how often a process is started on new ports when one was
// taken.
const PortTries = 3

// NATS is a nats-server process with JetStream.
type NATS struct {
	*Proc
	URL      string
	StoreDir string
}

// StartNATS runs a nats-server process built from the module on a free
// loopback port with its store in dir.
func StartNATS(t testing.TB, dir string) *NATS {
	t.Helper()
	for try := 1; ; try++ {
		port := bustest.FreePort(t)
		p := Start(t, "nats-server", bustest.ServerBinary(t), nil, "-js", "-sd", dir, "-a", "127.0.0.1", "-p", fmt.Sprint(port))
		err := p.AwaitOutput(t.Context(), "Server is ready", 30*time.Second)
		if err == nil {
			return &NATS{Proc: p, URL: fmt.Sprintf("nats://127.0.0.1:%d", port), StoreDir: dir}
		}
		if !p.PortTaken() || try == PortTries {
			t.Fatal(err)
		}
		p.Kill()
		t.Logf("nats-server: port %d taken; trying another", port)
	}
}

// FleetOn finds the all-in-one running on dataDir (waiting for it to
// start) and returns its NATS, the URL with its credentials.
func FleetOn(t testing.TB, dataDir string) *NATS {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r, err := fleetdir.Find(ctx, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	url, err := r.URL()
	if err != nil {
		t.Fatal(err)
	}
	return &NATS{URL: url, StoreDir: filepath.Join(dataDir, "jetstream")}
}

// Connect connects to the server and provisions the fleet's layout.
func (n *NATS) Connect(t testing.TB, layout bus.Layout) *bus.Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: n.URL, Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.NC.Close() })
	if err := bus.Provision(ctx, b, layout); err != nil {
		t.Fatal(err)
	}
	return b
}

// WriteConfig writes v as a JSON config file and returns its path.
func WriteConfig(t testing.TB, v any) string {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
