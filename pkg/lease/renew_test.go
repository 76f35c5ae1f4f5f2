package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/lease"
)

// TestRenewWaitsForABucketLeader: a renewal sent while the bucket has no
// leader (its node died; here the cluster lost quorum) is made once it
// has one again, while the lease still holds. It failed at once ("no
// response from stream"), and every holder stopped its work: a turn was
// abandoned and run again from its checkpoint, a channel connection
// dropped, a consolidation given up.
func TestRenewWaitsForABucketLeader(t *testing.T) {
	for _, m := range releaseModes {
		t.Run(m.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cluster, b := bustest.StartClusterJetStream(t, 3)
			_, tbl, l := heldLease(ctx, t, b, 10*time.Minute, 3, m.opts(b)...)
			cluster.LoseQuorum(ctx, b, "$KV.test_leases.probe")
			took, err := cluster.RegainQuorum(func() error { return l.Renew(ctx) })
			if err != nil {
				t.Fatalf("renew while the bucket elected a leader: %v", err)
			}
			t.Logf("renewed %s after the node was started again", took.Round(time.Millisecond))
			if err := l.Renew(ctx); err != nil {
				t.Errorf("renew after the election: %v", err)
			}
			if _, err := tbl.Acquire(ctx, "s1", "worker-b"); !errors.Is(err, lease.ErrHeld) {
				t.Errorf("acquire by another after the renewals: %v, want ErrHeld", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Errorf("release after the renewals: %v", err)
			}
		})
	}
}

// TestRenewSentAgainWhenATryIsLost: a renewal whose try is never answered
// is sent again. When the lost try was stored, the next one finds the
// revision changed; the entry, still the holder's, tells it was its own
// write, so the lease is kept (not reported lost), and later renewals and
// the release go on from the stored revision. The one try took the whole
// call (10 s) and failed the holder's work.
func TestRenewSentAgainWhenATryIsLost(t *testing.T) {
	for _, stored := range []bool{false, true} {
		name := map[bool]string{false: "lost before the store", true: "stored, answer lost"}[stored]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			b := bustest.StartJetStream(t)
			lossy := &unansweredPublishes{JetStream: b.JS, lose: 1, store: stored}
			kv, tbl, l := heldLease(ctx, t, b, 10*time.Minute, 1, lease.WithPublisher(lossy))
			if err := l.Renew(ctx); err != nil {
				t.Fatalf("renew after a lost try: %v", err)
			}
			if lossy.lost.Load() != 1 {
				t.Fatalf("%d publishes lost, want 1", lossy.lost.Load())
			}
			if err := l.Renew(ctx); err != nil {
				t.Fatalf("renew after the recovered one: %v", err)
			}
			if h, _ := tbl.Holder(ctx, "s1"); h != "worker-a" {
				t.Fatalf("holder = %q, want worker-a", h)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := lease.NewTable(kv).Acquire(ctx, "s1", "worker-b"); err != nil {
				t.Errorf("acquire after the release: %v", err)
			}
		})
	}
}

// TestRenewStopsBeforeTheLeaseMayExpire: renewals that are never
// answered are tried again, but the call fails while the lease is still
// held, so the holder stops its work before anyone can take the lease
// over; and the failure is not ErrLost, which would say someone has.
func TestRenewStopsBeforeTheLeaseMayExpire(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b := bustest.StartJetStream(t)
	lossy := &unansweredPublishes{JetStream: b.JS, lose: -1}
	kv, _, l := heldLease(ctx, t, b, 5*time.Second, 1, lease.WithPublisher(lossy))
	err := l.Renew(ctx)
	if err == nil || errors.Is(err, lease.ErrLost) {
		t.Fatalf("renew never answered: %v, want a failure that is not ErrLost", err)
	}
	if _, aerr := lease.NewTable(kv).Acquire(ctx, "s1", "worker-b"); !errors.Is(aerr, lease.ErrHeld) {
		t.Errorf("acquire by another as the renewal failed: %v, want ErrHeld (the lease had expired before the holder was told)", aerr)
	}
	if n := lossy.lost.Load(); n < 2 {
		t.Errorf("%d tries, want the renewal sent again", n)
	}
	t.Logf("failed after %d tries: %v", lossy.lost.Load(), err)
}

// unansweredPublishes is a JetStream whose first lose publishes (all, if
// negative) are never answered: each waits for its context, as a request
// lost with a server does, after storing the message if store is set.
type unansweredPublishes struct {
	jetstream.JetStream
	lose  int32
	store bool
	lost  atomic.Int32
	// bound is the time the first lost try had, from its context's
	// deadline as it began (0: none).
	bound atomic.Int64
}

func (u *unansweredPublishes) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if u.lose >= 0 && u.lost.Load() >= u.lose {
		return u.JetStream.PublishMsg(ctx, m, opts...)
	}
	if u.lost.Add(1) == 1 {
		if d, ok := ctx.Deadline(); ok {
			u.bound.Store(int64(time.Until(d)))
		}
	}
	if u.store {
		if _, err := u.JetStream.PublishMsg(ctx, m, opts...); err != nil {
			return nil, err
		}
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// heldLease makes the bucket test_leases on b with ttl and replicas, a
// table on it with opts, and acquires s1 for worker-a.
func heldLease(ctx context.Context, t *testing.T, b *bus.Bus, ttl time.Duration, replicas int, opts ...lease.Option) (jetstream.KeyValue, *lease.Table, *lease.Lease) {
	t.Helper()
	kv, err := b.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "test_leases", TTL: ttl, Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	tbl := lease.NewTable(kv, opts...)
	l, err := tbl.Acquire(ctx, "s1", "worker-a")
	if err != nil {
		t.Fatal(err)
	}
	return kv, tbl, l
}
