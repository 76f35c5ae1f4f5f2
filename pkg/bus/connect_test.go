package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
)

// TestConnectMovesPastAServerThatNeverAnswers: a server that takes the
// TCP connection and never answers (here a port whose listener nobody
// accepts on: the kernel completes the handshake) holds one connect
// attempt for ConnectTimeout, not for the caller's whole deadline (an
// hour here), and the connection keeps that bound for its reconnects.
func TestConnectMovesPastAServerThatNeverAnswers(t *testing.T) {
	srv := bustest.StartServer(t)
	silent := bustest.TakenPort(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	defer cancel()
	type result struct {
		b   *bus.Bus
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := bus.Connect(ctx, bus.Config{URL: "nats://" + silent.Addr().String() + "," + srv.ClientURL(), Name: t.Name()}, nats.DontRandomize())
		done <- result{b, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(3 * bus.ConnectTimeout):
		t.Fatalf("Connect still waits on the server that never answers after %s", 3*bus.ConnectTimeout)
	}
	if r.err != nil {
		t.Fatalf("connect: %v", r.err)
	}
	defer r.b.NC.Close()
	if got := r.b.NC.ConnectedUrl(); got != srv.ClientURL() {
		t.Errorf("connected to %s, want %s", got, srv.ClientURL())
	}
	if got := r.b.NC.Opts.Timeout; got > bus.ConnectTimeout {
		t.Errorf("reconnects wait %s on a server, want at most %s", got, bus.ConnectTimeout)
	}
}

// TestConnectionLeavesAServerThatFroze: the server a connection uses
// stops answering without closing it (a frozen node, one cut off the
// network: no FIN, no RST). The connection notices by its pings and
// reconnects to the next server within 3 PingIntervals (with nats.go's
// default, 2 minutes, that would be 4–6 minutes).
func TestConnectionLeavesAServerThatFroze(t *testing.T) {
	srv := bustest.StartServer(t)
	hop := bustest.NewProxy(t, srv.ClientURL())
	reconnected := make(chan string, 1)
	hop.Connect(t, srv.ClientURL(), nats.ReconnectHandler(func(nc *nats.Conn) { reconnected <- nc.ConnectedUrl() }))
	hop.Freeze()
	frozen := time.Now()
	select {
	case got := <-reconnected:
		t.Logf("reconnected to %s %s after the freeze", got, time.Since(frozen).Round(time.Millisecond))
		if got != srv.ClientURL() {
			t.Errorf("reconnected to %s, want %s", got, srv.ClientURL())
		}
	case <-time.After(4 * bus.PingInterval):
		t.Fatalf("still on the frozen server %s after the freeze", 4*bus.PingInterval)
	}
}

// TestCloseDoesNotWaitForAServerThatIsGone: closing a connection whose
// server has gone, with nothing waiting to be sent, skips the flush, which
// waited its whole 5 s for a reconnect: a CLI leaving after its fleet
// stopped took 5.0 s to exit (0.02 s now, measured on the binaries).
func TestCloseDoesNotWaitForAServerThatIsGone(t *testing.T) {
	srv := bustest.StartServer(t)
	b, err := bus.Connect(t.Context(), bus.Config{URL: srv.ClientURL(), Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	if !bus.FlushesOnClose(b) {
		t.Error("a connected bus would close without flushing what it published")
	}
	lost := b.NC.StatusChanged(nats.RECONNECTING)
	srv.Shutdown()
	bustest.Receive(t, lost, 10*time.Second)
	if bus.FlushesOnClose(b) {
		t.Error("Close would flush, waiting for a server that is gone, with nothing to send")
	}
	closed := make(chan struct{})
	go func() {
		b.Close()
		close(closed)
	}()
	bustest.Receive(t, closed, 30*time.Second)
}

// TestCloseDeliversWhatWaitsForAReconnect: a message published while the
// connection reconnects waits in its buffer; Close waits for the server
// to be back and sends it, where closing at once would drop it (a tool
// runner's last result when its node restarts as the runner stops).
func TestCloseDeliversWhatWaitsForAReconnect(t *testing.T) {
	srv := bustest.StartServer(t)
	proxy := bustest.NewProxy(t, srv.ClientURL())
	b := proxy.Connect(t, srv.ClientURL())
	watch, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	got := make(chan *nats.Msg, 1)
	sub, err := watch.ChanSubscribe("close.buffered", got)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}

	lost := b.NC.StatusChanged(nats.RECONNECTING)
	proxy.Cut()
	bustest.Receive(t, lost, 10*time.Second)
	if err := b.NC.Publish("close.buffered", []byte("last result")); err != nil {
		t.Fatal(err)
	}
	// Close starts while the message is still in the buffer: with a
	// Close that skipped the flush while reconnecting, 5 of 5 runs lost it.
	if !bus.FlushesOnClose(b) {
		t.Error("Close would skip the flush while a message waits in the reconnect buffer")
	}
	b.Close()
	if m := bustest.Receive(t, got, 10*time.Second); string(m.Data) != "last result" {
		t.Errorf("got %q", m.Data)
	}
}
