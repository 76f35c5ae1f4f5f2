package openaiapi_test

import (
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
)

// TestStoreFillsWhileWaiting: a request waiting for its answer when the
// store fills is answered 507 at once instead of waiting for a commit
// that cannot happen.
func TestStoreFillsWhileWaiting(t *testing.T) {
	b := bustest.StartJetStream(t, channels.Assets)
	var full atomic.Bool
	storage := func() error {
		if full.Load() {
			return gateway.ErrStorageFull
		}
		return nil
	}
	srv := httptest.NewServer(newServer(t, b, storage))
	t.Cleanup(srv.Close)
	release := make(chan struct{})
	w := workertest.Start(t, b, script, workertest.HoldUntil(release, 10*time.Second))
	// Registered after the worker's, so it runs first and frees it.
	t.Cleanup(func() { close(release) })
	done := make(chan error, 1)
	go func() {
		_, err := postKeyed(ctx(t), srv.URL, "k", "hello")
		done <- err
	}()
	w.Next(t) // the request reached the worker
	full.Store(true)
	start := time.Now()
	select {
	case err := <-done:
		se, ok := err.(*statusError)
		if !ok || se.status != 507 {
			t.Fatalf("got %v, want 507 storage full", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting request was not answered within 5s of the store filling")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("answered %s after the store filled", d)
	}
}
