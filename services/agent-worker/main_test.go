package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	"github.com/nanofleet/nanofleet/services/agent-worker/service"
)

// TestWaitsForTheCluster: started against a 3-node cluster of which only
// one node runs (no JetStream quorum: nothing can be provisioned), the
// worker neither exits nor says it is ready; /readyz says why. Once the
// other nodes start, it provisions its streams and buckets with 3
// replicas and becomes ready, without a restart. It rides out a restart
// of the whole cluster the same way, and stops cleanly when told to.
func TestWaitsForTheCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cluster := bustest.NewCluster(t, 3, 0)
	conf := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(conf, []byte(`{"nats": {"replicas": 3}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := svc.Flags{NATS: cluster.URLs(), Config: conf, HTTP: svctest.FreeAddr(t), LogLevel: "error"}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- run(runCtx, flags, "test", t.TempDir()) }()

	code, body := svctest.WaitReadyz(ctx, t, flags.HTTP, done, func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, "provision")
	})
	t.Logf("without quorum: /readyz %d %q", code, body)

	cluster.Start(1)
	cluster.Start(2)
	svctest.WaitReadyz(ctx, t, flags.HTTP, done, func(code int, _ string) bool { return code == http.StatusOK })

	b, err := bus.Connect(ctx, bus.Config{URL: cluster.URLs(), Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.NC.Close()
	l := bus.DefaultLayout()
	l.Replicas = 3
	diffs, err := bus.CheckLayout(ctx, b, l, service.Assets)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Errorf("after start-up: %s", d)
	}

	// The whole cluster restarts: the service loses NATS (and says so),
	// then is ready again on its own.
	for i := range 3 {
		cluster.Stop(i)
	}
	code, body = svctest.WaitReadyz(ctx, t, flags.HTTP, done, func(code int, _ string) bool { return code != http.StatusOK })
	t.Logf("cluster down: /readyz %d %q", code, body)
	for i := range 3 {
		cluster.Start(i)
	}
	svctest.WaitReadyz(ctx, t, flags.HTTP, done, func(code int, _ string) bool { return code == http.StatusOK })

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after stop = %v, want nil", err)
		}
	case <-ctx.Done():
		t.Fatal("service did not stop")
	}
}
