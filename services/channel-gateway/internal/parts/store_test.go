package parts_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
)

// TestStoreIsShared: what one gateway's store marks, another's reads;
// ids of any characters are kept apart, an empty id is not tracked, and a
// record that is not a count is an error rather than a guess.
func TestStoreIsShared(t *testing.T) {
	b := bustest.StartJetStream(t, bus.KeyValue(jetstream.KeyValueConfig{Bucket: "delivered"}))
	kv, err := b.KV(t.Context(), "delivered")
	if err != nil {
		t.Fatal(err)
	}
	one, other := parts.NewStore(kv), parts.NewStore(kv)
	tests := []struct {
		name, id string
		mark     int // 0: none
		want     int
	}{
		{"never sent", "9:0", 0, 0},
		{"two pieces", "9:1", 2, 2},
		{"an id a key cannot hold", "9:1 *.>", 5, 5},
		{"no id", "", 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.mark > 0 {
				if err := one.Mark(t.Context(), tt.id, tt.mark); err != nil {
					t.Fatal(err)
				}
			}
			if n, err := other.Sent(t.Context(), tt.id); n != tt.want || err != nil {
				t.Errorf("Sent = %d, %v; want %d", n, err, tt.want)
			}
		})
	}
	if got, _ := other.Sent(t.Context(), "9:1"); got != 2 {
		t.Errorf("9:1 became %d, overwritten by another id", got)
	}
	if _, err := kv.Put(t.Context(), "parts-bad", []byte("many")); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Sent(t.Context(), "bad"); err == nil {
		t.Error("a record that is not a count read without an error")
	}
}
