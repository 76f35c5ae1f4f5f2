// Package gatewaytest runs a channel adapter in a gateway of its own on a
// test's bus, without the rest of the fleet, for the adapters' tests
// (internal/workertest plays the agent worker), and collects its logs.
package gatewaytest

import (
	"bytes"
	"context"
	"crypto/rand"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// StopTimeout bounds how long a stopping gateway may take.
const StopTimeout = 10 * time.Second

// Build constructs the adapter under test with the gateway's context,
// what a gateway gives its adapters (the bus, its access gate and its
// status reporter) and logger.
type Build func(ctx context.Context, deps adapterdeps.Deps, log *slog.Logger) (gateway.Adapter, error)

// Run starts a gateway on b serving the adapter build returns, with a
// short redelivery backoff, announced in discovery as a channel-gateway
// does (under [Gateway.ID], which its status records are written as). stop, also called when the test ends, stops
// it and reports an error its Run returned or a gateway that did not stop
// within StopTimeout.
func Run(t testing.TB, b *bus.Bus, log *slog.Logger, build Build) (stop func()) {
	t.Helper()
	return Start(t, b, log, build).Stop
}

// Gateway is a gateway running in a test.
type Gateway struct {
	t          testing.TB
	b          *bus.Bus
	id         string
	cancel     context.CancelFunc // the adapter's context
	run        func() error       // stops the gateway's Run
	unregister func()
	once       sync.Once
}

// ID is the id the gateway announces and reports its channels' status
// as.
func (g *Gateway) ID() string { return g.id }

// Start is Run returning the gateway, which can also be killed.
func Start(t testing.TB, b *bus.Bus, log *slog.Logger, build Build) *Gateway {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	gate, err := access.Open(ctx, b, access.WithLogger(log))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	board, err := status.Open(ctx, b)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	id := "test-gateway-" + rand.Text()[:6]
	rep := board.Reporter(id)
	a, err := build(ctx, adapterdeps.Deps{Bus: b, Gate: gate, Status: rep}, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cfg := gateway.DefaultConfig()
	cfg.MinBackoff = 50 * time.Millisecond
	g, err := gateway.New(cfg, b, []gateway.Adapter{a}, gateway.WithLogger(log), gateway.WithStatus(rep))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	unregister, err := fleetstatus.Register(ctx, b.NC, fleetstatus.GatewayService, id, fleetstatus.WithChannels([]string{a.Channel()}))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	gw := &Gateway{t: t, b: b, id: id, cancel: cancel, unregister: unregister}
	gw.run = svctest.Run(t, g.Run, svctest.StopWithin(StopTimeout))
	t.Cleanup(gw.Stop)
	return gw
}

// Stop stops the gateway (its announcement first) and reports an error its Run returned or a
// gateway that did not stop within StopTimeout. Stopping again does
// nothing.
func (g *Gateway) Stop() { g.end(false) }

// Kill closes the gateway's bus connection before stopping it, so that
// it cannot release what it holds (its leases) nor write its status, and
// no longer answers discovery, as when its process dies;
// the error its Run returns then is not reported.
func (g *Gateway) Kill() { g.end(true) }

func (g *Gateway) end(kill bool) {
	g.once.Do(func() {
		if kill {
			g.b.NC.Close()
		} else {
			g.unregister()
		}
		g.cancel()
		if err := g.run(); err != nil && !kill {
			g.t.Errorf("gateway: %v", err)
		}
	})
}

// WaitDelivered waits up to within until the gateways on b are done with
// n replies of channel, all it has: each delivered (every call it made to
// the platform answered) and acknowledged, or dead-lettered. A test can
// then check that nothing more was sent.
func WaitDelivered(t testing.TB, b *bus.Bus, channel string, n int, within time.Duration) {
	t.Helper()
	bustest.WaitAcked(t, b, b.Space.OutboundStream(), b.Space.GatewayConsumer(channel), n, within)
}

// Logs collects log output, safe for the gateway's goroutines; the zero
// value is ready to use.
type Logs struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{} // closed and replaced at each write
}

// Write appends p.
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrote != nil {
		close(l.wrote)
		l.wrote = nil
	}
	return l.buf.Write(p)
}

// Count is how many times s occurs in the logs.
func (l *Logs) Count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// String is everything logged so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// WaitFor waits until the logs contain s.
func (l *Logs) WaitFor(t testing.TB, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		found := strings.Contains(l.buf.String(), s)
		if l.wrote == nil {
			l.wrote = make(chan struct{})
		}
		wrote := l.wrote
		l.mu.Unlock()
		if found {
			return
		}
		select {
		case <-wrote:
		case <-deadline:
			t.Fatalf("log never said %q within %s", s, timeout)
		}
	}
}
