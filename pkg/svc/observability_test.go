package svc_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/observe/observetest"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
)

// TestObservabilityDrains: the server answers once Observability returns,
// reports not ready once the service's context ends (it drains) while
// staying alive, and stops on stop.
func TestObservabilityDrains(t *testing.T) {
	addr := svctest.FreeAddr(t)
	ctx, drain := context.WithCancel(t.Context())
	defer drain()
	stop, err := svc.Observability(ctx, addr, observe.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	observetest.Walk(t, "http://"+addr, []observetest.Step{
		{Name: "alive", Path: "/healthz", WantCode: 200, WantBody: "ok"},
		{Name: "ready", Path: "/readyz", WantCode: 200, WantBody: "ready"},
		{Name: "draining is not ready", Before: drain, Path: "/readyz", WantCode: 503, WantBody: "draining: context canceled"},
		{Name: "draining is alive", Path: "/healthz", WantCode: 200, WantBody: "ok"},
	})
	stop()
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Fatal("server still answers after stop")
	}
}

// TestObservabilityNamesTheKey: a taken port fails naming the setting
// that chose it, the file's key and the flag.
func TestObservabilityNamesTheKey(t *testing.T) {
	taken := bustest.TakenPort(t)
	_, err := svc.Observability(t.Context(), taken.Addr().String(), observe.NewRegistry(), nil)
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "(observability.listen or --http)") {
		t.Fatalf("Observability on a taken port = %v, want address in use naming observability.listen or --http", err)
	}
}
