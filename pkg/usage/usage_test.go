package usage_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/usage"
)

// TestAddsFromManyWritersAllCount: adds to one user's day racing from
// several counters (as from several workers and consolidators) all count,
// and each user has a count of their own.
func TestAddsFromManyWritersAllCount(t *testing.T) {
	b := bustest.StartJetStream(t, usage.Assets)
	ctx := t.Context()
	const writers, adds = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*adds)
	for range writers {
		c, err := usage.Open(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for range adds {
				errs <- c.Add(ctx, "telegram:ada", 7)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	c, err := usage.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Add(ctx, "slack:U1", 3); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		payer string
		want  int64
	}{
		{"telegram:ada", writers * adds * 7},
		{"slack:U1", 3},
		{"telegram:bob", 0},
	} {
		if got, err := c.Spent(ctx, tc.payer); err != nil || got != tc.want {
			t.Errorf("Spent(%q) = %d, %v; want %d", tc.payer, got, err, tc.want)
		}
	}
}

// TestAddNothingWritesNothing: a call that reported no tokens leaves no
// key behind.
func TestAddNothingWritesNothing(t *testing.T) {
	b := bustest.StartJetStream(t, usage.Assets)
	ctx := t.Context()
	c, err := usage.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Add(ctx, "cli:ada", 0); err != nil {
		t.Fatal(err)
	}
	kv, err := b.KV(ctx, usage.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, usage.Key("cli:ada", time.Now())); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("Get after adding 0 tokens: %v, want not found", err)
	}
}

func TestKey(t *testing.T) {
	day := time.Date(2026, 3, 1, 23, 30, 0, 0, time.FixedZone("", -2*3600)) // 01:30 UTC the next day
	if got, want := usage.Key("telegram:ada", day), "telegram=3Aada.20260302"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
}
