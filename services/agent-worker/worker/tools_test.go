package worker

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// gatedRunners answers Catalog with the tools it holds once the test lets
// it (gate), or with err.
type gatedRunners struct {
	gate  chan struct{}
	calls chan struct{}
	tools []string
	err   error
}

func (g *gatedRunners) Catalog(ctx context.Context) ([]*nanofleetv1.ToolDefinition, error) {
	g.calls <- struct{}{}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if g.err != nil {
		return nil, g.err
	}
	var defs []*nanofleetv1.ToolDefinition
	for _, n := range g.tools {
		defs = append(defs, &nanofleetv1.ToolDefinition{Name: n})
	}
	return defs, nil
}

func (g *gatedRunners) Call(context.Context, *nanofleetv1.ToolRequest) (*nanofleetv1.ToolResult, error) {
	return nil, errors.New("not a runner")
}

func names(defs []*nanofleetv1.ToolDefinition) []string {
	var out []string
	for _, d := range defs {
		out = append(out, d.GetName())
	}
	return out
}

// TestStaleCatalogServesWhileRefreshing: once the runners have answered, a
// turn never waits for the catalog: an old one is served and refreshed in
// the background, and a failed refresh keeps the runners' tools.
func TestStaleCatalogServesWhileRefreshing(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel() // ends a refresh still held at the gate
	g := &gatedRunners{gate: make(chan struct{}), calls: make(chan struct{}, 10), tools: []string{"read_file"}}
	c := &catalog{remote: g, log: slog.New(slog.DiscardHandler)}
	get := func() []string { defs, _ := c.definitions(ctx); return names(defs) }
	age := func() {
		c.mu.Lock()
		c.fetched = time.Now().Add(-catalogTTL)
		c.mu.Unlock()
	}
	// settle waits for the refresh the gate let go to be applied.
	settle := func() {
		t.Helper()
		bustest.Eventually(t, 5*time.Second, func() error {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.refreshing {
				return errors.New("refresh did not finish")
			}
			return nil
		})
	}

	first := make(chan []string)
	go func() { first <- get() }()
	bustest.Receive(t, g.calls, 10*time.Second)
	g.gate <- struct{}{} // the first catalog is waited for
	if got := bustest.Receive(t, first, 10*time.Second); len(got) != 1 || got[0] != "read_file" {
		t.Fatalf("first catalog = %v, want [read_file]", got)
	}

	g.tools = []string{"exec", "read_file"}
	age()
	if got := get(); len(got) != 1 { // the refresh is held at the gate
		t.Fatalf("catalog during a refresh = %v, want the stale [read_file]", got)
	}
	bustest.Receive(t, g.calls, 10*time.Second)
	g.gate <- struct{}{}
	settle()
	if got := get(); len(got) != 2 {
		t.Fatalf("catalog after the refresh = %v, want [exec read_file]", got)
	}

	g.err = errors.New("runners gone")
	age()
	_ = get()
	bustest.Receive(t, g.calls, 10*time.Second)
	g.gate <- struct{}{}
	settle()
	if got := get(); len(got) != 2 {
		t.Errorf("catalog after a failed refresh = %v, want the runners' tools kept", got)
	}
}
