package bus_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
)

// startServer runs an embedded JetStream server with domain until the end
// of the test.
func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.JetStream, opts.StoreDir, opts.NoSigs = "127.0.0.1", -1, true, t.TempDir(), true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	return s
}

// TestDomainReachesTheHubsJetStream: a fleet connected to a leaf node
// whose own JetStream is another domain provisions and reads the hub's
// streams, the direct gets included, when it names the hub's domain.
func TestDomainReachesTheHubsJetStream(t *testing.T) {
	hubOpts := &server.Options{ServerName: "hub", JetStreamDomain: "hub", LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: -1}}
	hub := startServer(t, hubOpts)
	// The server writes the port it chose into its options.
	hubLeafURL := &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", hubOpts.LeafNode.Port)}
	leaf := startServer(t, &server.Options{ServerName: "leaf", JetStreamDomain: "leaf",
		LeafNode: server.LeafNodeOpts{Remotes: []*server.RemoteLeafOpts{{URLs: []*url.URL{hubLeafURL}}}}})
	bustest.Eventually(t, 10*time.Second, func() error {
		if leaf.NumLeafNodes() == 0 {
			return context.DeadlineExceeded
		}
		return nil
	})

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: leaf.ClientURL(), Prefix: "nanofleet", Domain: "hub", Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.NC.Close)
	if err := bus.Provision(ctx, b, bustest.TestLayout()); err != nil {
		t.Fatalf("provision through the leaf: %v", err)
	}
	subj := b.Space.Inbound("cli", "c1")
	if _, err := b.JS.Publish(ctx, subj, []byte("hello")); err != nil {
		t.Fatal(err)
	}

	// The streams are the hub's, not the leaf's.
	hubConn, err := bus.Connect(ctx, bus.Config{URL: hub.ClientURL(), Prefix: "nanofleet", Name: "hub"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hubConn.NC.Close)
	if _, err := hubConn.JS.Stream(ctx, b.Space.InboundStream()); err != nil {
		t.Fatalf("inbound stream on the hub: %v", err)
	}
	local, err := jetstream.New(b.NC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := local.Stream(ctx, b.Space.InboundStream()); err == nil {
		t.Fatal("the stream was created in the leaf's own domain")
	}

	m, ok, err := b.Direct.Last(ctx, b.Space.InboundStream(), subj)
	if err != nil || !ok || string(m.Data) != "hello" {
		t.Fatalf("direct get through the domain: %q %v %v", m.Data, ok, err)
	}
}
