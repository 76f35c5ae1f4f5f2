package bustest

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

// TestClusterNodeStartsOnNewPortsWhenItsOwnAreTaken: a node whose client
// port was taken after it was chosen (by another process, or as the local
// port of a connection) starts on new ports and joins the cluster; it
// waited 30 s and failed the test, "not ready for connections", without a reason.
func TestClusterNodeStartsOnNewPortsWhenItsOwnAreTaken(t *testing.T) {
	c := NewCluster(t, 3, 1, 2)
	taken, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", c.nodes[0].opts.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	c.Start(0)
	if c.nodes[0].srv == nil {
		t.Fatal("node 0 not running")
	}
	if got := c.nodes[0].opts.Port; got == taken.Addr().(*net.TCPAddr).Port {
		t.Fatalf("node 0 still on the taken port %d", got)
	}
	c.WaitJetStream(30 * time.Second)
}

// TestClusterNodesRouteToWhereANodeMoved follows svctest's
// WaitsForTheCluster: one node up, then the other two, of which the first
// finds its route port taken and moves, then the whole cluster restarts.
// The nodes started after the move must route to its new port, not the
// one it left: that one belongs to someone else now, and a node that
// dialed it reached the moved node only once the moved node's own retry
// came (a second later, or more on a loaded machine); a JetStream request
// sent meanwhile to a stream led on the other side was lost, and a test
// waiting on it hung for its full timeout.
func TestClusterNodesRouteToWhereANodeMoved(t *testing.T) {
	c := NewCluster(t, 3, 0)
	old := c.nodes[1].opts.Cluster.Port
	taken := listenOn(t, old)
	url := c.URL(1)
	c.Start(1)
	if c.nodes[1].opts.Cluster.Port == old {
		t.Fatalf("node 1 still on the taken route port %d", old)
	}
	if got := c.URL(1); got != url {
		t.Errorf("node 1's client URL is %s, want %s: only its route port was taken", got, url)
	}
	c.Start(2)
	c.WaitJetStream(30 * time.Second)

	for i := range 3 {
		c.Stop(i)
	}
	// Node 1 stays down and the ports it had and has are watched: the
	// first node to dial it shows which one the others know. The taken
	// port starts over, its backlog holding node 0's dials from before
	// the restart.
	_ = taken.Close()
	dials := make(chan int, 2)
	watch := func(ln net.Listener) {
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
			dials <- ln.Addr().(*net.TCPAddr).Port
		}()
	}
	watch(listenOn(t, old))
	moved := listenOn(t, c.nodes[1].opts.Cluster.Port)
	watch(moved)
	c.Start(0)
	c.Start(2)
	select {
	case got := <-dials:
		if got == old {
			t.Fatalf("a node dialed node 1's old route port %d, not its new one %d", old, c.nodes[1].opts.Cluster.Port)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no node dialed node 1")
	}
	_ = moved.Close()
	c.Start(1)
	c.WaitJetStream(30 * time.Second)
}

// listenOn listens on the loopback port until the test ends.
func listenOn(t *testing.T, port int) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// TestFreePortIsBelowTheEphemeralRange: FreePort's ports come from below
// the kernel's ephemeral range, so that no outgoing connection can take
// one as its local port before the test binds it (as one took a cluster
// node's route port during make race).
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral port range to read: %v", err)
	}
	var low, high int
	if _, err := fmt.Sscan(string(data), &low, &high); err != nil {
		t.Fatalf("ip_local_port_range %q: %v", data, err)
	}
	if low-minPort < 1000 {
		t.Skipf("ephemeral range starts at %d: no room below it", low)
	}
	for range 20 {
		port := FreePort(t)
		if port < minPort || port >= low {
			t.Fatalf("FreePort = %d, want in [%d, %d)", port, minPort, low)
		}
		listenOn(t, port).Close()
	}
}
