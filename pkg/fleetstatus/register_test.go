package fleetstatus_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
)

func TestRegisterIsDiscovered(t *testing.T) {
	b := bustest.StartJetStream(t)
	stop, err := fleetstatus.Register(t.Context(), b.NC, fleetstatus.WorkerService, "w-7")
	if err != nil {
		t.Fatal(err)
	}
	found, err := fleetstatus.Discover(t.Context(), b.NC, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Name != fleetstatus.WorkerService || found[0].Metadata["id"] != "w-7" {
		t.Fatalf("discovered %+v", found)
	}
	stop()
	found, _ = fleetstatus.Discover(t.Context(), b.NC, 300*time.Millisecond)
	if len(found) != 0 {
		t.Fatalf("still discovered after stop: %+v", found)
	}
}

func TestDefaultIDIsHostAndPid(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skipf("no hostname: %v", err)
	}
	if got, want := fleetstatus.DefaultID(), fmt.Sprintf("%s-%d", host, os.Getpid()); got != want {
		t.Errorf("DefaultID() = %q, want %q", got, want)
	}
}

// TestRegisterWaitsNoLongerThanItsContext: while the server cannot be
// reached, Register waits for the announcement to reach it no longer than
// its context lasts.
func TestRegisterWaitsNoLongerThanItsContext(t *testing.T) {
	srv := bustest.StartServer(t)
	b := srv.Connect(t, "")
	gone := b.NC.StatusChanged(nats.RECONNECTING)
	srv.Shutdown()
	// A flush under way when the client sees the server gone returns at
	// once; one begun while it reconnects waits.
	bustest.Receive(t, gone, 10*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	done := make(chan func(), 1)
	go func() {
		stop, err := fleetstatus.Register(ctx, b.NC, fleetstatus.WorkerService, "w-8")
		if err != nil {
			t.Error(err)
			stop = func() {}
		}
		done <- stop
	}()
	select {
	case stop := <-done:
		stop()
	case <-time.After(5 * time.Second):
		t.Fatal("Register still waiting for the server 5 s after its context ended")
	}
}
