package svctest

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/svc"
)

// WaitsForTheCluster checks a service binary's run against a 3-node
// cluster of which only one node runs (no JetStream quorum: nothing can be
// provisioned): the service neither exits nor says it is ready, and
// /readyz says why. Once the other nodes start, it provisions what decl
// declares with 3 replicas and becomes ready, without a restart. It rides
// out a restart of the whole cluster the same way, and stops cleanly.
func WaitsForTheCluster(t *testing.T, run func(ctx context.Context, flags svc.Flags) error, decl bus.Declare) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cluster := bustest.NewCluster(t, 3, 0)
	conf := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(conf, []byte(`{"nats": {"replicas": 3}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := svc.Flags{NATS: cluster.URLs(), Config: conf, HTTP: FreeAddr(t), LogLevel: "error"}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- run(runCtx, flags) }()

	code, body := WaitReadyz(ctx, t, flags.HTTP, done, func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, "provision")
	})
	t.Logf("without quorum: /readyz %d %q", code, body)

	cluster.Start(1)
	cluster.Start(2)
	WaitReadyz(ctx, t, flags.HTTP, done, func(code int, _ string) bool { return code == http.StatusOK })

	b, err := bus.Connect(ctx, bus.Config{URL: cluster.URLs(), Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.NC.Close()
	l := bus.DefaultLayout()
	l.Replicas = 3
	// Each check has its own bound and is tried again, as a service's
	// calls are: a request lost while the restarted nodes' routes form
	// would otherwise hold the test to its whole timeout.
	var diffs []bus.Difference
	err = bus.RetryEach(ctx, backoff.Backoff{}, 10*time.Second, func(ctx context.Context) error {
		diffs, err = bus.CheckLayout(ctx, b, l, decl)
		return err
	}, func(err error, _ time.Duration) { t.Logf("check layout: %v; trying again", err) })
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
	code, body = WaitReadyz(ctx, t, flags.HTTP, done, func(code int, _ string) bool { return code != http.StatusOK })
	t.Logf("cluster down: /readyz %d %q", code, body)
	for i := range 3 {
		cluster.Start(i)
	}
	WaitReadyz(ctx, t, flags.HTTP, done, func(code int, _ string) bool { return code == http.StatusOK })

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
