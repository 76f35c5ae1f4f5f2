package fleetstatus_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
)

func TestRegisterIsDiscovered(t *testing.T) {
	b := bustest.StartJetStream(t)
	stop, err := fleetstatus.Register(b.NC, fleetstatus.WorkerService, "w-7")
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
