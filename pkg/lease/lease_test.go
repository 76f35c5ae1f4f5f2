package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/lease"
)

// releaseModes are the two ways a table releases: through kv.Delete, and
// publishing the delete marker itself (WithPublisher). Every behaviour
// test runs in both.
var releaseModes = []struct {
	name string
	opts func(*bus.Bus) []lease.Option
}{
	{"kv.Delete", func(*bus.Bus) []lease.Option { return nil }},
	{"publisher", func(b *bus.Bus) []lease.Option { return []lease.Option{lease.WithPublisher(b.JS)} }},
}

func forEachMode(t *testing.T, test func(t *testing.T, newTable func(ttl time.Duration) (*lease.Table, *bus.Bus))) {
	for _, m := range releaseModes {
		t.Run(m.name, func(t *testing.T) {
			test(t, func(ttl time.Duration) (*lease.Table, *bus.Bus) {
				t.Helper()
				b := bustest.StartJetStream(t)
				kv, err := b.JS.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "test_leases", TTL: ttl})
				if err != nil {
					t.Fatal(err)
				}
				return lease.NewTable(kv, m.opts(b)...), b
			})
		})
	}
}

func TestOneHolderAtATime(t *testing.T) {
	forEachMode(t, testOneHolderAtATime)
}

func testOneHolderAtATime(t *testing.T, newTable func(time.Duration) (*lease.Table, *bus.Bus)) {
	ctx := t.Context()
	tbl, _ := newTable(time.Minute)
	a, err := tbl.Acquire(ctx, "s1", "worker-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Acquire(ctx, "s1", "worker-b"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second acquire: %v, want ErrHeld", err)
	}
	if h, _ := tbl.Holder(ctx, "s1"); h != "worker-a" {
		t.Errorf("holder = %q", h)
	}
	if err := a.Renew(ctx); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, err := tbl.Acquire(ctx, "s1", "worker-b"); err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	// a no longer holds it: renewing must fail and releasing must not
	// remove b's lease (nor fail: the lease is not a's any more).
	if err := a.Renew(ctx); !errors.Is(err, lease.ErrLost) {
		t.Errorf("stale renew: %v, want ErrLost", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Errorf("stale release: %v, want nil", err)
	}
	if h, err := tbl.Holder(ctx, "s1"); err != nil || h != "worker-b" {
		t.Errorf("stale release removed b's lease; holder = %q (%v)", h, err)
	}
}

func TestExpiredLeaseCanBeTaken(t *testing.T) {
	forEachMode(t, testExpiredLeaseCanBeTaken)
}

func testExpiredLeaseCanBeTaken(t *testing.T, newTable func(time.Duration) (*lease.Table, *bus.Bus)) {
	ctx := t.Context()
	tbl, _ := newTable(2 * time.Second)
	if _, err := tbl.Acquire(ctx, "s1", "dead-worker"); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Acquire(ctx, "s1", "worker-b"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("lease taken before it expired: %v, want ErrHeld", err)
	}
	bustest.Eventually(t, 10*time.Second, func() error {
		_, err := tbl.Acquire(ctx, "s1", "worker-b")
		if err != nil && !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("acquire: %v", err)
		}
		return err
	})
	if h, _ := tbl.Holder(ctx, "s1"); h != "worker-b" {
		t.Errorf("holder after expiry = %q, want worker-b", h)
	}
}

func TestOwnerTakesOverItsOwnLease(t *testing.T) {
	forEachMode(t, testOwnerTakesOverItsOwnLease)
}

func testOwnerTakesOverItsOwnLease(t *testing.T, newTable func(time.Duration) (*lease.Table, *bus.Bus)) {
	ctx := t.Context()
	tbl, _ := newTable(time.Minute)
	if _, err := tbl.Acquire(ctx, "s1", "worker-a"); err != nil {
		t.Fatal(err)
	}
	// worker-a crashed and came back under the same name.
	again, err := tbl.Acquire(ctx, "s1", "worker-a")
	if err != nil {
		t.Fatalf("restarted owner could not take over: %v", err)
	}
	if err := again.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Acquire(ctx, "s1", "worker-b"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("other owner: %v, want ErrHeld", err)
	}
}

// TestReleasedLeaseTakenAgain: a key this table released is taken again
// in one request with a publisher (three without); and the release reads
// as a free key to another table too, which learns nothing from it, and
// whose taking the key makes this table's next acquire fail as held.
func TestReleasedLeaseTakenAgain(t *testing.T) {
	for _, m := range []struct {
		name     string
		opts     func(*bus.Bus) []lease.Option
		requests int
	}{
		{"kv.Delete", releaseModes[0].opts, 3},
		{"publisher", releaseModes[1].opts, 1},
	} {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			b := bustest.StartJetStream(t)
			kv, err := b.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "test_leases", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			tbl, other := lease.NewTable(kv, m.opts(b)...), lease.NewTable(kv)
			a, err := tbl.Acquire(ctx, "s1", "worker-a")
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if h, err := other.Holder(ctx, "s1"); err != nil || h != "" {
				t.Fatalf("holder after release = %q, %v; want none", h, err)
			}
			// The KV writes and reads of the next acquire, seen by a
			// subscriber on the same connection.
			sub, err := b.NC.SubscribeSync("$KV.test_leases.>")
			if err != nil {
				t.Fatal(err)
			}
			gets, err := b.NC.SubscribeSync("$JS.API.>")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tbl.Acquire(ctx, "s1", "worker-a2"); err != nil {
				t.Fatalf("acquire after release: %v", err)
			}
			if err := b.NC.Flush(); err != nil {
				t.Fatal(err)
			}
			writes, _, _ := sub.Pending()
			reads, _, _ := gets.Pending()
			if writes+reads != m.requests {
				t.Errorf("acquire after release: %d writes + %d reads, want %d requests", writes, reads, m.requests)
			}
			if h, _ := other.Holder(ctx, "s1"); h != "worker-a2" {
				t.Errorf("holder = %q, want worker-a2", h)
			}

			// Released again, then taken by another table: this table's
			// remembered marker is no longer the key's last revision.
			l, err := tbl.Acquire(ctx, "s2", "worker-a")
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := other.Acquire(ctx, "s2", "worker-b"); err != nil {
				t.Fatalf("other table after release: %v", err)
			}
			if _, err := tbl.Acquire(ctx, "s2", "worker-a"); !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("acquire of a key taken since its release: %v, want ErrHeld", err)
			}
		})
	}
}

// TestReleaseWaitsForABucketLeader: a release sent while the bucket has no
// leader (its node died; here the cluster lost quorum) is made once it
// has one again, within the call's time, so the next holder need not
// wait for the lease to expire. It failed at once ("no response from
// stream"): on a 3-node cluster every session whose turn ended as the
// bucket's node was killed waited for its lease's TTL (next turns 19–21 s).
func TestReleaseWaitsForABucketLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cluster, b := bustest.StartClusterJetStream(t, 3)
	_, tbl, l := heldLease(ctx, t, b, 10*time.Minute, 3, lease.WithPublisher(b.JS))
	// Without quorum the bucket has no leader: its subjects answer nobody.
	cluster.LoseQuorum(ctx, b, "$KV.test_leases.probe")
	took, err := cluster.RegainQuorum(func() error { return l.Release(ctx) })
	if err != nil {
		t.Fatalf("release while the bucket elected a leader: %v", err)
	}
	t.Logf("released %s after the node was started again", took.Round(time.Millisecond))
	if _, err := tbl.Acquire(ctx, "s1", "worker-b"); err != nil {
		t.Errorf("acquire after the release: %v", err)
	}
}

// TestReleaseSentAgainWhenATryIsLost: a release whose publish is never
// answered (lost with a node that stopped) is sent again within the
// call's time, so the next holder need not wait for the lease to expire.
// The one try took the whole call (10 s) and failed: on a 3-node cluster,
// a session whose turn ended as a node was stopped with SIGTERM waited
// for its lease's TTL (next turn 31 s).
func TestReleaseSentAgainWhenATryIsLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b := bustest.StartJetStream(t)
	lossy := &unansweredPublishes{JetStream: b.JS, lose: 1}
	_, tbl, l := heldLease(ctx, t, b, 10*time.Minute, 1, lease.WithPublisher(lossy))
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release after a lost try: %v", err)
	}
	if lossy.lost.Load() != 1 {
		t.Fatalf("%d publishes lost, want the first", lossy.lost.Load())
	}
	// The lost try had a try's time (2 s), not the whole call's (10 s).
	if bound := time.Duration(lossy.bound.Load()); bound <= 0 || bound > 2*time.Second {
		t.Errorf("the lost try was given %s, want a try's 2 s", bound.Round(time.Millisecond))
	}
	if _, err := tbl.Acquire(ctx, "s1", "worker-b"); err != nil {
		t.Errorf("acquire after the release: %v", err)
	}
}

// TestAcquireOutlivesAnAnswerLostWithTheConnection: the worker's
// connection drops (its node shuts down) while its create of the lease is
// on the way. That request is never answered, and Acquire waited out its
// whole bound (10 s) and failed the turn; it must try again on the
// connection that comes back.
func TestAcquireOutlivesAnAnswerLostWithTheConnection(t *testing.T) {
	srv := bustest.StartServer(t)
	direct := srv.Connect(t, "")
	if _, err := direct.JS.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "test_leases", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	hop := bustest.NewProxy(t, srv.ClientURL())
	b := hop.Connect(t, srv.ClientURL())
	kv, err := b.JS.KeyValue(t.Context(), "test_leases")
	if err != nil {
		t.Fatal(err)
	}
	tbl := lease.NewTable(kv)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var l *lease.Lease
	hop.CutAt(ctx, t, "PUB $KV.test_leases.s1 ", func() { l, err = tbl.Acquire(ctx, "s1", "worker-a") })
	if err != nil {
		t.Fatalf("Acquire with its answer lost with the connection: %v", err)
	}
	if h, _ := tbl.Holder(ctx, "s1"); h != "worker-a" || l == nil {
		t.Errorf("holder = %q after Acquire", h)
	}
}
