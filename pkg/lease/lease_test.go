package lease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/lease"
)

func newTable(t *testing.T, ttl time.Duration) *lease.Table {
	t.Helper()
	b := bustest.StartJetStream(t)
	kv, err := b.JS.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "test_leases", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return lease.NewTable(kv)
}

func TestOneHolderAtATime(t *testing.T) {
	ctx := t.Context()
	tbl := newTable(t, time.Minute)
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
	b, err := tbl.Acquire(ctx, "s1", "worker-b")
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	// a no longer holds it: renewing must fail and releasing must not
	// remove b's lease.
	if err := a.Renew(ctx); !errors.Is(err, lease.ErrLost) {
		t.Errorf("stale renew: %v, want ErrLost", err)
	}
	_ = a.Release(ctx)
	if h, _ := tbl.Holder(ctx, "s1"); h != "worker-b" {
		t.Errorf("stale release removed b's lease; holder = %q", h)
	}
	_ = b
}

func TestExpiredLeaseCanBeTaken(t *testing.T) {
	ctx := t.Context()
	tbl := newTable(t, 2*time.Second)
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
	ctx := t.Context()
	tbl := newTable(t, time.Minute)
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
