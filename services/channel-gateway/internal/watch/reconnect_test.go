package watch_test

import (
	"context"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/watch"
)

// TestNewOutlivesItsConnectionDropping: the gateway's connection drops
// (its node stops: in lame duck mode it closes its clients' connections)
// while New waits for the server to have the live subscription. nats.go
// fails that flush with "connection closed" although it reconnects, and
// New gave up: during a graceful restart of a node of a 3-node cluster an
// API request was answered 503 "The fleet is not reachable." at once
// (1 of 9,899 requests of 8 sessions; a web chat is closed the same way).
// New must go on once the connection is back.
func TestNewOutlivesItsConnectionDropping(t *testing.T) {
	srv := bustest.StartServer(t)
	srv.Connect(t, "") // provisions the layout
	hop := bustest.NewProxy(t, srv.ClientURL())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b := hop.Connect(t, srv.ClientURL())
	// The live subscription and the flush after it reach the proxy and
	// stop there; then the connection drops.
	var err error
	hop.CutAt(ctx, t, "SUB "+b.Space.Live("api", "c1")+" ", func() {
		var w *watch.Watcher
		if w, err = watch.New(ctx, b, "api", "c1"); err == nil {
			go func() { _ = w.Run(ctx) }()
		}
	})
	if err != nil {
		t.Fatalf("New with its connection dropped and back: %v", err)
	}
}
