package bustest

import (
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

// SealStream seals stream: every publish to it is refused, as a store
// that can write nothing refuses it, while what it holds stays readable.
func SealStream(t testing.TB, b *bus.Bus, stream string) {
	t.Helper()
	st, err := b.JS.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.Sealed = true
	if _, err := b.JS.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatalf("seal %s: %v", stream, err)
	}
}
