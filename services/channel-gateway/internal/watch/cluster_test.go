package watch_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/observe/observetest"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/watch"
)

// TestWatcherKeepsItsStartWhenItsConsumerIsLost: on a 3-node cluster, the
// node holding a watcher's consumer goes down before the first reply, and
// the reply is stored while it is down. The watcher makes its consumer
// again and still delivers that reply. Started "from now" (DeliverNew), the
// consumer made again started from the moment it was made and skipped the
// reply: the API request that waited for it hung until its timeout, though
// the turn had answered (seen with a SIGSTOPped nats-server).
func TestWatcherKeepsItsStartWhenItsConsumerIsLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cluster, b := bustest.StartClusterJetStream(t, 3)

	w, host := watchApart(ctx, t, cluster, b)

	// The watcher notices its consumer is gone by missed heartbeats
	// (2 s) and makes it again (bus.Follower, 3 s a try); the bound of
	// replyAfterStop is loose for a loaded machine (40 s was not enough
	// twice when nats.go's own tries of 10 s made it again).
	replyAfterStop(ctx, t, cluster, b, w, host)
}

// replyAfterStop stops node host of cluster, stores a reply for api:c1
// through pub, waits up to 90 s for w to deliver it, and returns how long
// after the stop it was stored and delivered.
func replyAfterStop(ctx context.Context, t *testing.T, cluster *bustest.Cluster, pub *bus.Bus, w *watch.Watcher, host int) (stored, delivered time.Duration) {
	t.Helper()
	start := time.Now()
	cluster.Stop(host)
	data, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Id: "r1", Channel: "api", ChatId: "c1", Content: "answer", Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL})
	if err := bustest.PublishRetrying(ctx, pub, pub.Space.Outbound("api", "c1"), data); err != nil {
		t.Fatalf("publish the reply after node %d stopped: %v", host, err)
	}
	stored = time.Since(start)
	if got := bustest.Receive(t, w.C, 90*time.Second); got.GetId() != "r1" {
		t.Errorf("watcher delivered %q, want r1", got.GetId())
	}
	return stored, time.Since(start)
}

// TestWatcherSoonFollowsItsConsumerOffAStoppedNode: on a 3-node cluster,
// the node holding a watcher's consumer shuts down (plainly, as on
// SIGTERM) and a reply is stored right after: the watcher notices within
// two of its 1 s heartbeats and delivers the reply. nats.go makes an
// ordered consumer again only once it has missed two idle heartbeats (the
// "server shutdown" status the node sends the pending pull does not do
// it), and with the default heartbeat of 5 s every API request and web
// chat whose consumer was on that node waited 10 s for its answer, with
// no log line (10.0 s in each of 8 runs; 2.0 s in each of 10 with the
// 1 s heartbeat). What is timed is the notice, stamped by the follower's
// log record when its heartbeat timer fires: the delivery after it waits
// on consumer creations, and one lost to a loaded machine (8.7 s in a CI
// run) says nothing about the heartbeat.
func TestWatcherSoonFollowsItsConsumerOffAStoppedNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cluster, b := bustest.StartClusterJetStream(t, 3)

	log, noticed := observetest.FirstLogged("heartbeats missed")
	w, host := watchApart(ctx, t, cluster, b, watch.WithLogger(log))
	// The reply is published on a node that stays up, to a stream led by
	// one: a stream whose leader shuts down may have none until an
	// election (7.3 s seen), which would delay the reply either way.
	other := (host + 1) % 3
	pub := cluster.ConnectThrough(t, other)
	cluster.LeadAway(ctx, pub, b.Space.OutboundStream(), host)

	stopped := time.Now()
	_, took := replyAfterStop(ctx, t, cluster, pub, w, host)
	at := bustest.Receive(t, noticed, time.Minute).Time
	if at.Before(stopped) {
		t.Fatalf("heartbeats missed %s before the node stopped: the notice timed is not the stop's", stopped.Sub(at))
	}
	t.Logf("node %d stopped; consumer lost noticed after %s, reply delivered after %s", host, at.Sub(stopped), took)
	// Two heartbeats and a clear margin, below the 10 s of the default.
	const within = 5 * time.Second
	if at.Sub(stopped) > within {
		t.Errorf("lost consumer noticed %s after its node stopped, want within %s (two heartbeats)", at.Sub(stopped), within)
	}
}

// watchApart runs a watcher of api:c1 connected to one node of cluster
// whose consumer lives on another, and returns it with that other node.
func watchApart(ctx context.Context, t *testing.T, cluster *bustest.Cluster, b *bus.Bus, opts ...watch.Option) (*watch.Watcher, int) {
	t.Helper()
	var w *watch.Watcher
	host := cluster.ConsumerApart(ctx, b, b.Space.OutboundStream(), func(conn *bus.Bus) func() {
		var err error
		if w, err = watch.New(ctx, conn, "api", "c1", opts...); err != nil {
			t.Fatal(err)
		}
		stop := svctest.Run(t, w.Run, svctest.StopWithin(10*time.Second))
		return func() { _ = stop() }
	})
	return w, host
}

// TestWatcherFollowsItsRepliesOffItsOwnNodeStopping: the node a gateway is
// connected to, the JetStream meta leader, shuts down while a watcher
// waits; the gateway reconnects to another node and the watcher delivers
// the reply stored meanwhile within seconds. nats.go makes the ordered
// consumer again on reconnect with tries of 10 s, and the first, sent
// while the meta leadership moved, was never answered: 11 s (the same
// for the CLI's client: TestClientFollowsItsRepliesOffItsOwnNodeStopping).
func TestWatcherFollowsItsRepliesOffItsOwnNodeStopping(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cluster, b := bustest.StartClusterJetStream(t, 3)
	host := cluster.MetaLeader()
	w, err := watch.New(ctx, cluster.ConnectThrough(t, host), "api", "c1")
	if err != nil {
		t.Fatal(err)
	}
	svctest.Run(t, w.Run, svctest.StopWithin(10*time.Second))
	pub := cluster.ConnectThrough(t, (host+1)%3)
	cluster.LeadAway(ctx, pub, b.Space.OutboundStream(), host)

	_, took := replyAfterStop(ctx, t, cluster, pub, w, host)
	// Room for two lost creations of 3 s on a loaded machine, below
	// the 11 s it took.
	const within = 8 * time.Second
	t.Logf("node %d stopped; reply delivered after %s", host, took)
	if took > within {
		t.Errorf("reply delivered %s after the gateway's node stopped, want within %s", took, within)
	}
}
