package worker

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// cachedRunners hands out the catalog it holds, as toolclient's cache
// does: the same slice until the test installs another, or err.
type cachedRunners struct {
	mu    sync.Mutex
	defs  []*nanofleetv1.ToolDefinition
	err   error
	calls int
}

func (r *cachedRunners) set(err error, tools ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.defs, r.err = nil, err
	for _, n := range tools {
		r.defs = append(r.defs, &nanofleetv1.ToolDefinition{Name: n})
	}
}

func (r *cachedRunners) CachedCatalog(context.Context) ([]*nanofleetv1.ToolDefinition, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	return r.defs, r.err
}

func (r *cachedRunners) Call(context.Context, *nanofleetv1.ToolRequest) (*nanofleetv1.ToolResult, error) {
	return nil, errors.New("not a runner")
}

func names(defs []*nanofleetv1.ToolDefinition) []string {
	var out []string
	for _, d := range defs {
		out = append(out, d.GetName())
	}
	return out
}

// TestCatalogMergesRunnersAndLocalTools: every turn asks the runners'
// cache; without runners a turn gets the local tools and the next asks
// again; the merge with the local tools is made again only when the
// cache hands out another catalog. (The cache's stale-while-refreshing
// lifetime is TestCachedCatalogServesStaleWhileRefreshing in
// pkg/toolclient.)
func TestCatalogMergesRunnersAndLocalTools(t *testing.T) {
	r := &cachedRunners{}
	c := &catalog{remote: r, local: []LocalTool{MessageTool{}}, log: slog.New(slog.DiscardHandler)}
	steps := []struct {
		name    string
		err     error
		tools   []string
		want    []string
		remerge bool
	}{
		{"no runners yet", errors.New("no responders"), nil, []string{"message"}, true},
		{"runners answer", nil, []string{"read_file", "exec"}, []string{"exec", "message", "read_file"}, true},
		{"same catalog", nil, nil, []string{"exec", "message", "read_file"}, false},
		{"catalog refreshed", nil, []string{"web_fetch"}, []string{"message", "web_fetch"}, true},
	}
	var prev []*nanofleetv1.ToolDefinition
	for i, s := range steps {
		if s.err != nil || s.tools != nil {
			r.set(s.err, s.tools...)
		}
		defs, byName := c.definitions(t.Context())
		if got := names(defs); !slices.Equal(got, s.want) {
			t.Errorf("%s: tools %v, want %v", s.name, got, s.want)
		}
		for _, n := range s.want {
			if byName[n].GetName() != n {
				t.Errorf("%s: %s not found by name", s.name, n)
			}
		}
		if remerged := prev == nil || !sameSlice(defs, prev); remerged != s.remerge {
			t.Errorf("%s: merged again = %v, want %v", s.name, remerged, s.remerge)
		}
		if r.calls != i+1 {
			t.Errorf("%s: runners' cache asked %d times, want once a turn", s.name, r.calls)
		}
		prev = defs
	}
}
