package svc_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/embeddednats"
	"github.com/nanofleet/nanofleet/pkg/svc"
)

// TestConnectWaitsForNATS: a service started before its NATS server
// waits for it, reporting why on its readiness, then connects and
// provisions once the server is there.
func TestConnectWaitsForNATS(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	port := bustest.FreePort(t)
	file := config.Defaults()
	file.NATS.URL = fmt.Sprintf("nats://127.0.0.1:%d", port)
	var ready svc.Readiness
	type result struct {
		b   *bus.Bus
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := svc.Connect(ctx, file, t.Name(), slog.New(slog.DiscardHandler), &ready)
		done <- result{b, err}
	}()

	// Not ready, saying why, and still trying.
	bustest.Eventually(t, 30*time.Second, func() error {
		select {
		case r := <-done:
			t.Fatalf("Connect returned before a server was up: %v", r.err)
		default:
		}
		if err := ready.Check(ctx); err == nil || !strings.Contains(err.Error(), "connect to nats") {
			return fmt.Errorf("readiness never said why: %v", err)
		}
		return nil
	})

	e, err := embeddednats.Start(embeddednats.Config{StoreDir: t.TempDir(), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("Connect did not return after the server started")
	}
	if r.err != nil {
		t.Fatalf("Connect: %v", r.err)
	}
	defer r.b.Close()
	diffs, err := bus.CheckLayout(ctx, r.b, svc.Layout(file))
	if err != nil || len(diffs) > 0 {
		t.Errorf("layout after Connect: %v, %v", diffs, err)
	}
}

// TestConnectFailsOnABadLayout: a layout the config gets wrong is not
// retried: it fails at once, naming the key.
func TestConnectFailsOnABadLayout(t *testing.T) {
	file := config.Defaults()
	file.NATS.URL = "nats://127.0.0.1:1"
	file.NATS.ReplayWindowSeconds = 1
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := svc.Connect(ctx, file, t.Name(), slog.New(slog.DiscardHandler), nil)
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "nats.replayWindowSeconds") {
		t.Errorf("Connect with a bad layout = %v, want config.ErrInvalid naming nats.replayWindowSeconds", err)
	}
}

func TestReadiness(t *testing.T) {
	var r svc.Readiness
	if err := r.Check(t.Context()); err == nil || err.Error() != "starting" {
		t.Errorf("zero Readiness = %v, want starting", err)
	}
	r.NotReady(errors.New("provision: no quorum"))
	if err := r.Check(t.Context()); err == nil || err.Error() != "provision: no quorum" {
		t.Errorf("after NotReady = %v", err)
	}
	r.Ready(func(context.Context) error { return nil })
	if err := r.Check(t.Context()); err != nil {
		t.Errorf("after Ready = %v", err)
	}
	var nilReady *svc.Readiness
	nilReady.NotReady(errors.New("ignored")) // must not panic
	nilReady.Ready(nil)
}
