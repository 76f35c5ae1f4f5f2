package fleetstatus_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
)

// TestGetListsEachConsumerOnceWithANodeDown: with a node down, the
// server lists the consumers only that node held as entries without a
// name (and names them as missing), and nats.go asks for the next page
// from how many entries it got, so a consumer can come twice. `nanofleet
// status` showed rows without a consumer name, and
// NANOFLEET_OUT/subagent_announce twice, while a node of a 3-node
// cluster was down.
func TestGetListsEachConsumerOnceWithANodeDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cluster, b := bustest.StartClusterJetStream(t, 3)
	out := b.Space.OutboundStream()
	stream, err := b.JS.Stream(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	meta := cluster.MetaLeader()
	if meta < 0 {
		t.Fatal("no meta leader")
	}
	// The node to stop leads neither the stream nor the meta layer, and
	// holds a consumer that is not the last one listed (one listed after
	// it is then listed again). A consumer with one replica is placed on
	// one of the stream's nodes at random: make them until one lands there.
	down := -1
	for i := range 3 {
		if i != meta && cluster.Name(i) != stream.CachedInfo().Cluster.Leader {
			down = i
		}
	}
	if down < 0 {
		t.Fatalf("the meta leader %s also leads %s, and no other node leads nothing", cluster.Name(meta), out)
	}
	placed := false
	for n := 0; !placed; n++ {
		if n == 30 {
			t.Fatalf("no consumer of 30 landed on %s", cluster.Name(down))
		}
		c, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: fmt.Sprintf("c%02d", n), AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1})
		if err != nil {
			t.Fatal(err)
		}
		placed = n > 0 && c.CachedInfo().Cluster.Leader == cluster.Name(down)
	}
	// One more after it, so that it is not the last.
	if _, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "c99", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	// Read through a node that stays up: a request lost with the stopped
	// node, on a connection moving away from it, is another matter.
	up, err := bus.Connect(ctx, bus.Config{URL: cluster.URL(meta), Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	cluster.Stop(down)

	st, err := fleetstatus.Get(ctx, up, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range st.Consumers {
		if c.Stream == out {
			names = append(names, c.Name)
		}
	}
	if len(st.Unreadable) > 0 {
		t.Fatalf("unreadable: %+v", st.Unreadable)
	}
	if u := slices.Compact(slices.Clone(names)); len(u) != len(names) || slices.Contains(names, "") {
		t.Errorf("consumers of %s with %s down: %q, want each once, with its name", out, cluster.Name(down), names)
	}
	t.Logf("%s down; consumers of %s listed: %v", cluster.Name(down), out, names)
}
