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
	// The worker holds its answer for as long as the test runs, so the
	// turn never commits: a 507 can only come from the store filling.
	release := make(chan struct{})
	w := workertest.Start(t, b, script, workertest.HoldUntil(release, time.Hour))
	// Registered after the worker's, so it runs first and frees it.
	t.Cleanup(func() { close(release) })
	done := make(chan error, 1)
	go func() {
		_, err := postKeyed(ctx(t), srv.URL, "k", "hello")
		done <- err
	}()
	w.Next(t) // the request reached the worker
	full.Store(true)
	// The request's own deadline (ctx: 15 s) ends a wait for the commit
	// with an error, not a 507; the receive's 30 s only guards a hang.
	err := bustest.Receive(t, done, 30*time.Second)
	se, ok := err.(*statusError)
	if !ok || se.status != 507 {
		t.Fatalf("got %v, want 507 storage full", err)
	}
}
