package chaos_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus/fleetstatustest"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// TestCheckpointMarkersExpireOnACluster: on a 3-node cluster with every
// bucket replicated three times, a cleared checkpoint's purge marker (a
// message with a per-message TTL) expires like on a single server, so
// idle sessions leave nothing in the checkpoint bucket.
func TestCheckpointMarkersExpireOnACluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b := startCluster(t, bustest.ServerBinary(t), t.TempDir(), 3).connect(ctx, t)
	store, err := session.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"cli:a", "cli:b"} {
		rev, err := store.SaveCheckpoint(ctx, key, &nanofleetv1.TurnCheckpoint{TurnId: "t", InboundSeq: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.ClearCheckpoint(ctx, key, rev); err != nil {
			t.Fatalf("clear checkpoint of %s: %v", key, err)
		}
	}
	stream, err := b.JS.Stream(ctx, "KV_"+b.Space.Bucket(bus.BucketCheckpoints))
	if err != nil {
		t.Fatal(err)
	}
	if r := stream.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("checkpoint bucket has %d replicas, want 3", r)
	}
	bustest.WaitSubjects(t, stream, 0, 30*time.Second) // the test layout's TTL is 1 s
}

// TestStatusWithAStreamLeaderKilled: when the node leading the inbound
// stream is killed, the streams it led answer nobody until their
// replicas elect new leaders (measured: 6 s). The fleet's status (the CLI's
// `status`, the dashboard) still comes back within its time, naming
// those streams as unreadable and showing the others; it failed whole.
func TestStatusWithAStreamLeaderKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cluster := startCluster(t, bustest.ServerBinary(t), t.TempDir(), 3)
	all := cluster.connect(ctx, t)
	in, err := all.JS.Stream(ctx, all.Space.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	leader := slices.IndexFunc(cluster.nodes, func(nd *node) bool { return nd.name == in.CachedInfo().Cluster.Leader })
	if leader < 0 {
		t.Fatalf("inbound stream led by %q, not a node of the cluster", in.CachedInfo().Cluster.Leader)
	}
	// The client talks to a node that stays up: a reconnect is another
	// event.
	b, err := bus.Connect(ctx, bus.Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", cluster.nodes[(leader+1)%3].port), Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	fleetstatustest.Online(t, b, fleetstatus.WorkerService, map[string]string{"instance": "w1"})

	cluster.nodes[leader].proc.Kill()
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	defer scancel()
	st, err := fleetstatus.Get(sctx, b, 300*time.Millisecond)
	if err != nil {
		t.Fatalf("status with the inbound stream's leader killed: %v", err)
	}
	var names []string
	for _, s := range st.Streams {
		names = append(names, s.Name)
	}
	for _, u := range st.Unreadable {
		names = append(names, u.Stream)
		if u.Err == "" {
			t.Errorf("unreadable %s without a reason", u.Stream)
		}
	}
	want := []string{b.Space.InboundStream(), b.Space.OutboundStream(), b.Space.HistoryStream(), b.Space.MemoryStream(), b.Space.DeadLetterStream()}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("streams read or unreadable = %v, want each of %v once", names, want)
	}
	if st.Online(fleetstatus.WorkerService) != 1 {
		t.Errorf("services = %+v, want the worker", st.Services)
	}
	t.Logf("%d streams read; unreadable: %+v", len(st.Streams), st.Unreadable)
}
