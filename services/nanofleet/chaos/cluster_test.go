package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
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
