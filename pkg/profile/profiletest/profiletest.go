// Package profiletest watches a test fleet's agent profiles.
package profiletest

import (
	"context"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/profile"
)

// Watch watches the profile bucket of b's fleet while ctx lasts; the
// watch is stopped at the end of the test at the latest.
func Watch(ctx context.Context, t testing.TB, b *bus.Bus) *profile.Cache {
	t.Helper()
	kv, err := b.KV(ctx, bus.BucketProfile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := profile.Watch(ctx, kv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// Ready is [Watch] once the cache holds the bucket's content.
func Ready(ctx context.Context, t testing.TB, b *bus.Bus) *profile.Cache {
	t.Helper()
	c := Watch(ctx, t, b)
	bustest.Receive(t, c.Ready(), 10*time.Second)
	return c
}
