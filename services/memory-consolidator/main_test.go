package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/svc"
)

// TestWaitsForTheCluster: started against a 3-node cluster of which only
// one node runs (no JetStream quorum: nothing can be provisioned), the
// service neither exits nor says it is ready; /readyz says why. Once the
// other nodes start, it provisions its streams with 3 replicas and
// becomes ready, without a restart; it stops cleanly when told to.
func TestWaitsForTheCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cluster := bustest.NewCluster(t, 3, 0)
	conf := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(conf, []byte(`{"nats": {"replicas": 3}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := svc.Flags{NATS: cluster.URLs(), Config: conf, HTTP: freeAddr(t), LogLevel: "error"}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- run(runCtx, flags, "test", "") }()

	readyz := "http://" + flags.HTTP + "/readyz"
	code, body := waitReadyz(ctx, t, readyz, done, func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, "provision")
	})
	t.Logf("without quorum: /readyz %d %q", code, body)

	cluster.Start(1)
	cluster.Start(2)
	waitReadyz(ctx, t, readyz, done, func(code int, _ string) bool { return code == http.StatusOK })

	b, err := bus.Connect(ctx, bus.Config{URL: cluster.URLs(), Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.NC.Close()
	l := bus.DefaultLayout()
	l.Replicas = 3
	diffs, err := bus.CheckLayout(ctx, b, l, memory.Assets)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Errorf("after start-up: %s", d)
	}

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

// waitReadyz polls /readyz until want accepts its answer, and fails the
// test if the service exits first or ctx ends.
func waitReadyz(ctx context.Context, t *testing.T, url string, done <-chan error, want func(int, string) bool) (int, string) {
	t.Helper()
	last := "no answer"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want(resp.StatusCode, string(data)) {
				return resp.StatusCode, string(data)
			}
			last = fmt.Sprintf("%d %q", resp.StatusCode, data)
		}
		select {
		case err := <-done:
			t.Fatalf("service exited: %v (last /readyz: %s)", err, last)
		case <-ctx.Done():
			t.Fatalf("gave up waiting; last /readyz: %s", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
