package runner_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

// TestRefusedImageStoresNoChunk: read_file attaches an image by storing
// it in the object store, which a model can ask for as often as it likes;
// with the store bounded (nats.blobsMaxMB) a put past the bound is refused
// before any chunk is sent. JetStream refused it itself, chunk by chunk,
// and the chunks taken before the bound were purged without their disk
// space coming back: against the real all-in-one, turns of refused 15 MB
// images filled a 256 MiB disk in six turns.
func TestRefusedImageStoresNoChunk(t *testing.T) {
	f := start(t, nil)
	ctx := t.Context()
	name := f.b.Space.Bucket(bus.BucketBlobs)
	if _, err := f.b.JS.UpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: name, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 400<<10)...)
	if err := os.WriteFile(filepath.Join(f.ws(), "x.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	lastSeq := func() uint64 {
		s, err := f.b.JS.Stream(ctx, "OBJ_"+name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	tests := []struct {
		name    string
		refused bool
	}{{"first", false}, {"second", false}, {"third, past the bound", true}, {"fourth", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := lastSeq()
			res := f.call("read_file", map[string]any{"path": "x.png"})
			refused := !strings.Contains(res.GetContent(), "is attached")
			if refused != tt.refused {
				t.Fatalf("result %q, want refused %v", res.GetContent(), tt.refused)
			}
			if after := lastSeq(); tt.refused && after != before {
				t.Errorf("a refused put stored %d messages", after-before)
			}
		})
	}
}
