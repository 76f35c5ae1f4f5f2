package bustest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/embeddednats"
)

// Cluster is a JetStream cluster of nats-servers embedded in the test
// process, clustered over loopback routes, each node with its own store
// in a temp dir. Nodes can be stopped and started again on the same
// store and ports, to take the cluster's quorum away and give it back.
type Cluster struct {
	t     testing.TB
	nodes []*clusterNode
}

type clusterNode struct {
	opts *server.Options
	srv  *server.Server
}

// NewCluster prepares an n-node cluster on free loopback ports and starts
// the nodes listed in up (all of them when up is empty); the others can
// be started later with [Cluster.Start].
func NewCluster(t testing.TB, n int, up ...int) *Cluster {
	t.Helper()
	if len(up) == 0 {
		for i := range n {
			up = append(up, i)
		}
	}
	c := &Cluster{t: t}
	dir := t.TempDir()
	// A name of its own: a node whose route names a port another node
	// left would otherwise join whatever cluster of another test took it.
	name := fmt.Sprintf("bustest-%08x", rand.Uint32())
	for i := range n {
		c.nodes = append(c.nodes, &clusterNode{opts: &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1",
			Port:       FreePort(t),
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			NoSigs:     true,
			NoLog:      true,
			MaxPayload: 8 << 20,
			Cluster: server.ClusterOpts{
				Name: name,
				Host: "127.0.0.1",
				Port: FreePort(t),
			},
		}})
	}
	c.setRoutes()
	t.Cleanup(func() {
		for i := range c.nodes {
			c.Stop(i)
		}
	})
	for _, i := range up {
		c.Start(i)
	}
	return c
}

// StartCluster starts an n-node cluster and waits until JetStream has its
// meta leader.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := NewCluster(t, n)
	c.WaitJetStream(30 * time.Second)
	return c
}

// StartClusterJetStream starts an n-node cluster, waits for its meta
// leader and returns it with a connection on which the test layout, with
// n replicas, and the assets of decls are provisioned (as
// [Cluster.Connect]).
func StartClusterJetStream(t testing.TB, n int, decls ...bus.Declare) (*Cluster, *bus.Bus) {
	t.Helper()
	c := StartCluster(t, n)
	l := TestLayout()
	l.Replicas = n
	return c, c.Connect(t, "", l, decls...)
}

// PublishRetrying publishes data on subj through JetStream until the
// stream takes it, a try failing with an error that is not
// [bus.Transient], or ctx ends; each try has 5 s. A cluster that has just
// lost a node or had it back refuses publishes until its streams have
// leaders again.
func PublishRetrying(ctx context.Context, b *bus.Bus, subj string, data []byte) error {
	return bus.RetryEach(ctx, backoff.Backoff{}, 5*time.Second, func(ctx context.Context) error {
		_, err := b.JS.Publish(ctx, subj, data)
		return err
	}, nil)
}

// Start starts node i (again) on its store and ports. A node whose
// ports were taken meanwhile (FreePort only finds a port free at the
// time; another process may bind it, or use it as a connection's local
// port, before the node does) is started again on a new one, up to three
// times: it routes to the running nodes itself, and the others route to
// its new port from their next start.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	if nd.srv != nil {
		return
	}
	for try := 1; ; try++ {
		opts := *nd.opts
		srv, err := server.NewServer(&opts)
		if err != nil {
			c.t.Fatalf("cluster node %d: %v", i, err)
		}
		err = embeddednats.RunServer(srv, nil, 30*time.Second)
		if err == nil {
			nd.srv = srv
			return
		}
		srv.Shutdown()
		if try == 3 {
			c.t.Fatalf("cluster node %d (try %d): %v", i, try, err)
		}
		// Only the port that was taken moves: clients given the node's
		// URL before (a service's --nats) still reach it after a taken
		// route port.
		switch msg := err.Error(); {
		case strings.Contains(msg, "Error listening on router port"):
			nd.opts.Cluster.Port = FreePort(c.t)
			c.setRoutes()
		case strings.Contains(msg, "Error listening on port"):
			nd.opts.Port = FreePort(c.t)
		default:
			c.t.Fatalf("cluster node %d (try %d): %v", i, try, err)
		}
		c.t.Logf("cluster node %d: %v; trying a new port", i, err)
	}
}

// setRoutes gives every node routes to the others' route ports. A running
// node keeps those it was started with (its server has a copy of the
// options), which may name a port another node has left: that node routes
// to it instead.
func (c *Cluster) setRoutes() {
	for i, nd := range c.nodes {
		var routes []*url.URL
		for j, other := range c.nodes {
			if i != j {
				routes = append(routes, server.RoutesFromStr(fmt.Sprintf("nats-route://127.0.0.1:%d", other.opts.Cluster.Port))...)
			}
		}
		nd.opts.Routes = routes
	}
}

// Stop shuts node i down and waits until it is down.
func (c *Cluster) Stop(i int) {
	nd := c.nodes[i]
	if nd.srv == nil {
		return
	}
	nd.srv.Shutdown()
	nd.srv.WaitForShutdown()
	nd.srv = nil
}

// URL is node i's client URL.
func (c *Cluster) URL(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[i].opts.Port) }

// URLs are the nodes' client URLs, comma separated, as a service's --nats.
func (c *Cluster) URLs() string {
	u := make([]string, len(c.nodes))
	for i, nd := range c.nodes {
		u[i] = fmt.Sprintf("nats://127.0.0.1:%d", nd.opts.Port)
	}
	return strings.Join(u, ",")
}

// WaitJetStream waits until a running node is the JetStream meta leader
// and knows every running node as a peer, and fails the test if that
// takes longer than d.
func (c *Cluster) WaitJetStream(d time.Duration) {
	c.t.Helper()
	Eventually(c.t, d, func() error {
		running := 0
		for _, nd := range c.nodes {
			if nd.srv != nil {
				running++
			}
		}
		for _, nd := range c.nodes {
			if nd.srv != nil && nd.srv.JetStreamIsLeader() && len(nd.srv.JetStreamClusterPeers()) >= running {
				return nil
			}
		}
		return fmt.Errorf("no JetStream meta leader that knows the %d running nodes", running)
	})
}

// MetaLeader is the index of the running node that is the JetStream meta
// leader, or -1 while there is none.
func (c *Cluster) MetaLeader() int {
	for i, nd := range c.nodes {
		if nd.srv != nil && nd.srv.JetStreamIsLeader() {
			return i
		}
	}
	return -1
}

// Name is node i's server name, as stream and consumer infos name their
// leaders.
func (c *Cluster) Name(i int) string { return c.nodes[i].opts.ServerName }

// FreePort returns a loopback port nothing listens on right now, picked
// at random below the kernel's ephemeral port range rather than from it
// (as port 0 is): any outgoing connection, in any process, may take a
// port of that range as its local port before the caller binds it, and
// make the bind fail with "address already in use". Below the range only
// another test picking the same port can take it.
func FreePort(t testing.TB) int {
	t.Helper()
	if low := ephemeralLow(); low-minPort >= 1000 {
		for range 100 {
			port := minPort + rand.IntN(low-minPort)
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err == nil {
				_ = ln.Close()
				return port
			}
		}
	}
	// No room below the range, or nothing free there: any free port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// minPort is the lowest port FreePort picks: the ports below are where
// services listen by default (the fleet's own 4222, 8080 and 9090 among
// them), and one started while a test holds its port would fail.
const minPort = 10000

// ephemeralLow is the low end of the kernel's ephemeral port range, from
// which outgoing connections take their local ports; where it cannot be
// read, Linux's default (other kernels' ranges start higher).
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return low
}

// TakenPort returns a loopback listener held until the test ends, for
// a test of what a taken port does to its user.
func TakenPort(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("take a port: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// ConnectThrough connects to the cluster through node i, the other
// nodes in order after it (for reconnecting), and closes the connection
// at the end of the test.
func (c *Cluster) ConnectThrough(t testing.TB, i int) *bus.Bus {
	t.Helper()
	urls := strings.Split(c.URLs(), ",")
	order := append([]string{urls[i]}, append(urls[:i:i], urls[i+1:]...)...)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: strings.Join(order, ","), Name: t.Name()}, nats.DontRandomize())
	if err != nil {
		t.Fatalf("connect through node %d: %v", i, err)
	}
	t.Cleanup(b.NC.Close)
	if got, want := b.NC.ConnectedServerName(), c.Name(i); got != want {
		t.Fatalf("connected to %s, want %s", got, want)
	}
	return b
}

// Connect connects to the cluster with prefix, provisions the core
// layout and the assets of decls with layout l (retrying while the
// cluster elects leaders), and closes the connection at the end of the
// test.
func (c *Cluster) Connect(t testing.TB, prefix string, l bus.Layout, decls ...bus.Declare) *bus.Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: c.URLs(), Prefix: prefix, Name: t.Name()})
	if err != nil {
		t.Fatalf("connect to the cluster: %v", err)
	}
	t.Cleanup(func() { b.NC.Close() })
	err = bus.RetryEach(ctx, backoff.Backoff{}, 10*time.Second, func(ctx context.Context) error {
		return bus.Provision(ctx, b, l, decls...)
	}, nil)
	if err != nil {
		t.Fatalf("provision on the cluster: %v", err)
	}
	return b
}
