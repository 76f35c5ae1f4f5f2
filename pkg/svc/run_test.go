package svc_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
)

// TestStopWhileStartingIsNoFailure: a service stopped while it still waits
// for NATS was asked to stop; Run returns nil, so the binary exits 0 and
// does not log a failure.
func TestStopWhileStartingIsNoFailure(t *testing.T) {
	flags := svc.Flags{NATS: "nats://127.0.0.1:1", HTTP: svctest.FreeAddr(t), LogLevel: "error"}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- svc.Run(ctx, flags, svc.Service{Name: "test", Start: func(context.Context, svc.Env) (func(context.Context) error, error) {
			t.Error("started without NATS")
			return nil, nil
		}})
	}()
	svctest.WaitReadyz(t.Context(), t, flags.HTTP, done, func(code int, _ string) bool { return code == http.StatusServiceUnavailable })
	stop()
	if err := bustest.Receive(t, done, 30*time.Second); err != nil {
		t.Fatalf("Run after a stop while starting = %v, want nil", err)
	}
}
