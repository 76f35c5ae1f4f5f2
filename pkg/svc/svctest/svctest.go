// Package svctest helps test what runs: a component's Run for the length
// of a test ([Run]), and a service binary's run function in-process (a
// free observability address, waiting on its /readyz).
package svctest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
)

// FreeAddr returns a loopback address nothing listens on right now, for a
// service's --http.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", bustest.FreePort(t))
}

// WaitReadyz asks addr's /readyz every 100 ms until want accepts the
// status and body, and returns them. It fails the test if the service
// exits first (done receives run's result) or ctx ends.
func WaitReadyz(ctx context.Context, t testing.TB, addr string, done <-chan error, want func(code int, body string) bool) (int, string) {
	t.Helper()
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		if err != nil {
			t.Fatal(err)
		}
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
