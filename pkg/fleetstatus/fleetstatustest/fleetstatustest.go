// Package fleetstatustest gives a test fleet something for fleetstatus to
// see: services online and a turn in flight, as the workers and tool
// runners make them.
package fleetstatustest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
)

// Version is the version every service Online registers announces.
const Version = "1.2.3"

// Online registers a service called name with metadata meta on b, as a
// worker or tool runner announces itself, until the test ends.
func Online(t testing.TB, b *bus.Bus, name string, meta map[string]string) {
	t.Helper()
	svc, err := micro.AddService(b.NC, micro.Config{Name: name, Version: Version, Metadata: meta})
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	// Answering discovery before the test asks on another connection.
	if err := b.NC.Flush(); err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
}

// InFlight publishes n inbound messages to one web chat and has the
// workers' consumer take the first without acknowledging it, as a worker
// running a turn does: one turn in flight and n-1 queued.
func InFlight(t testing.TB, b *bus.Bus, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cons, err := b.JS.CreateOrUpdateConsumer(ctx, b.Space.InboundStream(), jetstream.ConsumerConfig{
		Durable: b.Space.WorkerConsumer(), AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatalf("workers' consumer: %v", err)
	}
	for range n {
		if _, err := b.JS.Publish(ctx, b.Space.Inbound("web", "c1"), []byte("hello")); err != nil {
			t.Fatalf("publish inbound: %v", err)
		}
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatalf("fetch inbound: %v", err)
	}
	for range batch.Messages() { // delivered, never acked: in flight
	}
	// The server counts a stored message as pending for a consumer after the
	// publish is acknowledged, on a goroutine of its own; under load the
	// consumer's info can still say 0 pending here (1 in 200 runs on a
	// loaded 2-core machine). Wait for the state this helper promises.
	bustest.Eventually(t, 10*time.Second, func() error {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumAckPending != 1 || info.NumPending != uint64(n-1) {
			return fmt.Errorf("workers' consumer: %d in flight, %d pending; want 1 and %d", info.NumAckPending, info.NumPending, n-1)
		}
		return nil
	})
}
