package memory_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/memory"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// TestTooLarge: Fits refuses, with ErrTooLarge, a document or history
// entry the bus would refuse, and the write itself, when tried, fails
// with ErrTooLarge too (the server's max payload, the bucket's max value
// size, the log stream's max message size); what fits is written.
func TestTooLarge(t *testing.T) {
	tests := []struct {
		name     string
		valueMax int32 // the memory bucket's max value size; 0: none of its own
		doc      int   // MEMORY.md bytes; 0: write a history entry instead
		entry    int   // history entry bytes
		tooLarge bool
	}{
		{"small document", 0, 1 << 10, 0, false},
		{"document below the server's max payload", 0, 7 << 20, 0, false},
		{"document above the server's max payload", 0, 9 << 20, 0, true},
		{"document within the bucket's max value size", 64 << 10, 32 << 10, 0, false},
		{"document above the bucket's max value size", 64 << 10, 100 << 10, 0, true},
		{"small entry", 0, 0, 1 << 10, false},
		{"entry above the log's max message size", 0, 0, 5 << 20, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t)
			ctx := t.Context()
			if tt.valueMax > 0 {
				kv, err := b.KV(ctx, bus.BucketMemory)
				if err != nil {
					t.Fatal(err)
				}
				st, err := kv.Status(ctx)
				if err != nil {
					t.Fatal(err)
				}
				cfg := st.Config()
				cfg.MaxValueSize = tt.valueMax
				if _, err := b.JS.UpdateKeyValue(ctx, cfg); err != nil {
					t.Fatal(err)
				}
			}
			var fits, write error
			if tt.doc > 0 {
				docs, err := memory.OpenDocs(ctx, b)
				if err != nil {
					t.Fatal(err)
				}
				scope := memory.AgentScope("default")
				doc := &nanofleetv1.MemoryDoc{Content: strings.Repeat("m", tt.doc)}
				fits = docs.Fits(ctx, scope, doc)
				_, write = docs.Put(ctx, scope, doc, 0)
			} else {
				key := fmt.Sprint("cli:", i)
				e := &nanofleetv1.HistoryEntry{SessionKey: key, Scope: memory.AgentScope("default").Key(), FromSeq: 1, ToSeq: 2, Text: strings.Repeat("e", tt.entry)}
				log := memory.OpenLog(b)
				fits = log.Fits(ctx, e)
				_, write = log.Append(ctx, e, 0)
			}
			if got := errors.Is(fits, memory.ErrTooLarge); got != tt.tooLarge || (!got && fits != nil) {
				t.Errorf("Fits = %v, want too large %v", fits, tt.tooLarge)
			}
			if got := errors.Is(write, memory.ErrTooLarge); got != tt.tooLarge || (!got && write != nil) {
				t.Errorf("write = %v, want too large %v", write, tt.tooLarge)
			}
		})
	}
}
