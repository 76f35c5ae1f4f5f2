package mcp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/nanofleet/nanofleet/pkg/bus"
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

// TestPublishOutlivesItsConnectionDropping: the runner's connection drops
// (its node restarts) while publishing waits for the server to hold the
// tools' subscriptions. nats.go fails that wait with "connection closed"
// though it reconnects and subscribes again; Publish then stopped the
// server's service, so its tools were not served by this runner until
// the MCP server listed them again. It must go on once the connection is
// back, and the tools be callable.
func TestPublishOutlivesItsConnectionDropping(t *testing.T) {
	s := bustest.StartServer(t)
	s.Connect(t, "pub")
	hop := bustest.NewProxy(t, s.ClientURL())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: hop.URL + "," + s.ClientURL(), Prefix: "pub", Name: t.Name()}, nats.DontRandomize())
	if err != nil {
		t.Fatal(err)
	}
	defer b.NC.Close()
	p := &mcp.MicroPublisher{
		NC:      b.NC,
		Service: micro.Config{Name: "tool-runner", Version: "0.0.1", QueueGroup: "tool-runner"},
		Subject: func(tool string) string { return "pub.tool." + tool },
		Handler: func(string) micro.Handler {
			return micro.HandlerFunc(func(r micro.Request) { _ = r.Respond([]byte("pong")) })
		},
	}
	hop.CutAt(ctx, t, "SUB pub.tool.echo ", func() { err = p.Publish(ctx, "srv", []toolschema.Tool{{Name: "echo"}}) })
	if err != nil {
		t.Fatalf("Publish with its connection dropped and back: %v", err)
	}
	caller := s.Connect(t, "pub")
	m, err := caller.NC.RequestWithContext(ctx, "pub.tool.echo", nil)
	if err != nil || string(m.Data) != "pong" {
		t.Fatalf("call the published tool: %v, %v", m, err)
	}
}
