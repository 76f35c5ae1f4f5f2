package fleetstatus_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
	up := cluster.ConnectThrough(t, meta)
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

// TestGetReadsEveryStreamWhileALeaderStops: a read of a stream sent
// while its leader's node stops may never be answered. Read once, the
// stream was listed as unreadable once ctx ended (seen in CI after
// 120 s; in 10 of 16 rounds of this test before the reads were tried
// again), though its replicas had a new leader within seconds. A lost round shows as a
// read of about 3 s (one try lost); the rounds end in milliseconds
// otherwise.
func TestGetReadsEveryStreamWhileALeaderStops(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cluster, b := bustest.StartClusterJetStream(t, 3)
			meta := cluster.MetaLeader()
			if meta < 0 {
				t.Fatal("no meta leader")
			}
			// A node that leads a stream and not the meta layer: stopping the
			// meta leader loses other requests, which is another matter.
			down := -1
			for _, name := range []string{b.Space.InboundStream(), b.Space.OutboundStream(), b.Space.HistoryStream(), b.Space.MemoryStream(), b.Space.DeadLetterStream()} {
				s, err := b.JS.Stream(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				for i := range 3 {
					if i != meta && cluster.Name(i) == s.CachedInfo().Cluster.Leader {
						down = i
					}
				}
			}
			if down < 0 {
				t.Skipf("the meta leader %s leads every stream", cluster.Name(meta))
			}
			up := cluster.ConnectThrough(t, meta)
			cluster.Stop(down)
			start := time.Now()
			st, err := fleetstatus.Get(ctx, up, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Unreadable) > 0 {
				t.Fatalf("%s down: unreadable after %v: %+v", cluster.Name(down), time.Since(start), st.Unreadable)
			}
			if len(st.Streams) != 5 {
				t.Errorf("%s down: %d streams read, want 5", cluster.Name(down), len(st.Streams))
			}
			t.Logf("%s down: every stream read in %v", cluster.Name(down), time.Since(start))
		})
	}
}
