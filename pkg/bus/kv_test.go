package bus_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

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

func TestGetProto(t *testing.T) {
	b := bustest.StartJetStream(t)
	kv, err := b.JS.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "PROTO"})
	if err != nil {
		t.Fatal(err)
	}
	good, err := proto.Marshal(wrapperspb.String("hello"))
	if err != nil {
		t.Fatal(err)
	}
	goodRev, err := kv.Put(t.Context(), "good", good)
	if err != nil {
		t.Fatal(err)
	}
	// A field 1 of wire type 7, which does not exist: no message decodes it.
	if _, err := kv.Put(t.Context(), "garbage", []byte{0x0f, 0xff}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		key      string
		want     string
		rev      uint64
		notFound bool
	}{
		{"stored message", "good", "hello", goodRev, false},
		{"absent key", "absent", "", 0, true},
		{"value that does not decode", "garbage", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got wrapperspb.StringValue
			e, err := bus.GetProto(t.Context(), kv, tt.key, &got)
			switch {
			case tt.notFound:
				if !errors.Is(err, jetstream.ErrKeyNotFound) {
					t.Fatalf("GetProto(%s) = %v; want ErrKeyNotFound", tt.key, err)
				}
			case tt.want == "":
				if err == nil || errors.Is(err, jetstream.ErrKeyNotFound) || !strings.Contains(err.Error(), tt.key) {
					t.Fatalf("GetProto(%s) = %v; want a decode error naming the key", tt.key, err)
				}
			default:
				if err != nil {
					t.Fatalf("GetProto(%s): %v", tt.key, err)
				}
				if got.GetValue() != tt.want || e.Revision() != tt.rev {
					t.Errorf("GetProto(%s) = %q at revision %d; want %q at %d", tt.key, got.GetValue(), e.Revision(), tt.want, tt.rev)
				}
			}
		})
	}
}
