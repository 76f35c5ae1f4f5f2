package bus_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
)

// TestStorageErrors publishes into real streams at their limits and checks
// how each refusal is classified.
func TestStorageErrors(t *testing.T) {
	b := bustest.StartJetStream(t)
	tests := []struct {
		name      string
		cfg       jetstream.StreamConfig
		sends     int
		size      int
		full, big bool
	}{
		{"max bytes, discard new", jetstream.StreamConfig{MaxBytes: 4096, Discard: jetstream.DiscardNew}, 3, 2000, true, false},
		{"max msgs, discard new", jetstream.StreamConfig{MaxMsgs: 2, Discard: jetstream.DiscardNew}, 3, 10, true, false},
		{"max msg size", jetstream.StreamConfig{MaxMsgSize: 1024}, 1, 2048, false, true},
		{"server max payload", jetstream.StreamConfig{}, 1, 9 << 20, false, true},
		{"fits", jetstream.StreamConfig{MaxMsgs: 10}, 3, 10, false, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Name = fmt.Sprintf("LIMITS_%d", i)
			tt.cfg.Subjects = []string{fmt.Sprintf("limits.%d", i)}
			if _, err := b.JS.CreateStream(t.Context(), tt.cfg); err != nil {
				t.Fatal(err)
			}
			var err error
			for range tt.sends {
				if _, err = b.JS.Publish(t.Context(), tt.cfg.Subjects[0], bytes.Repeat([]byte("x"), tt.size)); err != nil {
					break
				}
			}
			if (err != nil) != (tt.full || tt.big) {
				t.Fatalf("last publish: %v", err)
			}
			if got := bus.StorageFull(err); got != tt.full {
				t.Errorf("StorageFull(%v) = %v, want %v", err, got, tt.full)
			}
			if got := bus.TooLarge(err); got != tt.big {
				t.Errorf("TooLarge(%v) = %v, want %v", err, got, tt.big)
			}
		})
	}
}
