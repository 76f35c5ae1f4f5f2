package mcp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
	"github.com/nanofleet/nanofleet/services/tool-runner/mcp"
)

// TestPublishEndsWithCtx: publishing a server's tools waits for the bus
// to hold their subscriptions, and that wait ends with the caller's
// context: a runner stopping while NATS is away is not held up by it (it
// waited 10 s whatever its context).
func TestPublishEndsWithCtx(t *testing.T) {
	s := bustest.StartServer(t)
	b := s.Connect(t, "pub")
	p := &mcp.MicroPublisher{
		NC:      b.NC,
		Service: micro.Config{Name: "tool-runner", Version: "0.0.1", QueueGroup: "tool-runner"},
		Subject: func(tool string) string { return "pub.tool." + tool },
		Handler: func(string) micro.Handler { return micro.HandlerFunc(func(micro.Request) {}) },
	}
	defs := []toolschema.Tool{{Name: "echo"}}
	if err := p.Publish(t.Context(), "srv", defs); err != nil {
		t.Fatalf("publish with the server up: %v", err)
	}
	gone := b.NC.StatusChanged(nats.RECONNECTING)
	s.Shutdown()
	// A flush begun while the client reconnects waits for the server.
	bustest.Receive(t, gone, 10*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := p.Publish(ctx, "srv", defs); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish with the server away = %v, want its context's deadline", err)
	}
	// Withdrawing waits for nothing.
	if err := p.Publish(ctx, "srv", nil); err != nil {
		t.Fatalf("withdraw: %v", err)
	}
}
