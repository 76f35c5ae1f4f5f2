package bus_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
)

func TestCompareAndSet(t *testing.T) {
	b := bustest.StartJetStream(t)
	kv, err := b.JS.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "CAS"})
	if err != nil {
		t.Fatal(err)
	}
	existing, err := kv.Create(t.Context(), "existing", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(t.Context(), "deleted", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(t.Context(), "deleted"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		key      string
		rev      uint64
		conflict bool
	}{
		{"absent key, rev 0: created", "absent", 0, false},
		{"deleted key, rev 0: created", "deleted", 0, false},
		{"existing key, rev 0: conflict", "existing", 0, true},
		{"existing key at its revision: updated", "existing", existing, false},
		{"existing key, stale revision: conflict", "existing", existing, true}, // after the update above
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rev, err := bus.CompareAndSet(t.Context(), kv, tt.key, []byte(tt.name), tt.rev)
			if tt.conflict {
				if !errors.Is(err, jetstream.ErrKeyExists) {
					t.Fatalf("CompareAndSet(%s, rev %d) = %d, %v; want an error matching ErrKeyExists", tt.key, tt.rev, rev, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("CompareAndSet(%s, rev %d): %v", tt.key, tt.rev, err)
			}
			e, err := kv.Get(t.Context(), tt.key)
			if err != nil {
				t.Fatal(err)
			}
			if e.Revision() != rev || string(e.Value()) != tt.name {
				t.Errorf("after CompareAndSet: revision %d value %q; want %d %q", e.Revision(), e.Value(), rev, tt.name)
			}
		})
	}
}
