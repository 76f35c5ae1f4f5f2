package fleet_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// documentedAssets reads the asset table of docs/ARCHITECTURE.md: the
// `P_…` names of its first column, with the kind its second column starts
// with (stream, KV, object store).
func documentedAssets(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Subjects, streams and buckets")
	if !ok {
		t.Fatal("docs/ARCHITECTURE.md has no section “Subjects, streams and buckets”")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	name := regexp.MustCompile("`(P_[A-Za-z0-9_-]+)`")
	out := map[string]string{}
	for line := range strings.Lines(section) {
		cols := strings.Split(line, "|")
		if len(cols) < 4 || !strings.HasPrefix(line, "|") {
			continue
		}
		kind := strings.TrimSpace(cols[2])
		for _, m := range name.FindAllStringSubmatch(cols[1], -1) {
			if _, dup := out[m[1]]; dup {
				t.Errorf("docs/ARCHITECTURE.md lists %s twice", m[1])
			}
			out[m[1]] = kind
		}
	}
	return out
}

// TestEveryAssetIsDocumented: the fleet's declared assets (what the
// all-in-one provisions, the union of every service's) are exactly the
// ones docs/ARCHITECTURE.md's table lists, each with its kind.
func TestEveryAssetIsDocumented(t *testing.T) {
	sp, err := subject.NewSpace("")
	if err != nil {
		t.Fatal(err)
	}
	all, err := bus.Declared(sp, bus.DefaultLayout(), fleet.Assets)
	if err != nil {
		t.Fatal(err)
	}
	docs := documentedAssets(t)
	upper := strings.TrimSuffix(sp.InboundStream(), "_IN")
	kinds := map[string]string{"stream": "stream", "bucket": "KV", "object store": "object store"}
	var declared []string
	for _, a := range all.List() {
		name := "P" + strings.TrimPrefix(a.Name, upper)
		declared = append(declared, name)
		kind, ok := docs[name]
		switch {
		case !ok:
			t.Errorf("%s %s is declared but not in docs/ARCHITECTURE.md's table", a.Kind, name)
		case !strings.HasPrefix(kind, kinds[a.Kind]):
			t.Errorf("docs/ARCHITECTURE.md says %s is %q, but it is declared as a %s", name, kind, a.Kind)
		}
	}
	for name := range docs {
		if !slices.Contains(declared, name) {
			t.Errorf("docs/ARCHITECTURE.md lists %s, but no package declares it", name)
		}
	}
}
