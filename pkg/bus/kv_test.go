package bus_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// TestModify: Modify hands change the value there (none for a missing or
// deleted key) and writes what it returns at the revision read; an equal
// value is not written, ErrDelete deletes; a key written between the read
// and the write is read and changed again; change's own error and a bus
// error that is neither a conflict nor transient are returned at once,
// change called once.
func TestModify(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	kv, err := b.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "MODIFY", MaxValueSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	errOwn := errors.New("change refused")
	appendX := func(old []byte, _ bool) ([]byte, error) { return append(old, 'x'), nil }
	tests := []struct {
		name    string
		stored  string // "" stores nothing; "-" stores then deletes
		change  func(old []byte, exists bool) ([]byte, error)
		want    string // the key's value after; "" absent
		wantErr error  // nil: none; errAny: any but the conflict
		calls   int
		written bool // the key's revision moved
		sneak   bool // another writer writes the key after change's first read
	}{
		{"absent key: created", "", appendX, "x", nil, 1, true, false},
		{"deleted key: created", "-", appendX, "x", nil, 1, true, false},
		{"existing key: updated from its value", "v", appendX, "vx", nil, 1, true, false},
		{"equal value: not written", "v", func(old []byte, _ bool) ([]byte, error) { return old, nil }, "v", nil, 1, false, false},
		{"ErrDelete: deleted", "v", func([]byte, bool) ([]byte, error) { return nil, bus.ErrDelete }, "", nil, 1, true, false},
		{"ErrDelete of an absent key: nothing", "", func([]byte, bool) ([]byte, error) { return nil, bus.ErrDelete }, "", nil, 1, false, false},
		{"written between read and write: read again", "v", appendX, "vsx", nil, 2, true, true},
		{"change's error: returned at once", "v", func([]byte, bool) ([]byte, error) { return nil, errOwn }, "v", errOwn, 1, false, false},
		{"value above the bucket's limit: returned at once", "v", func([]byte, bool) ([]byte, error) { return make([]byte, 1000), nil }, "v", errAny, 1, false, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprint("k", i)
			var before uint64
			if tt.stored != "" {
				if before, err = kv.Put(ctx, key, []byte(strings.TrimPrefix(tt.stored, "-"))); err != nil {
					t.Fatal(err)
				}
				if tt.stored == "-" {
					if err := kv.Delete(ctx, key); err != nil {
						t.Fatal(err)
					}
					before = 0
				}
			}
			calls := 0
			rev, err := bus.Modify(ctx, kv, key, func(old []byte, exists bool) ([]byte, error) {
				calls++
				if exists != (old != nil) {
					t.Errorf("change given %q, exists %v", old, exists)
				}
				if tt.sneak && calls == 1 {
					if _, err := kv.Put(ctx, key, append(old, 's')); err != nil {
						t.Fatal(err)
					}
				}
				return tt.change(old, exists)
			})
			switch {
			case tt.wantErr == errAny:
				if err == nil || bus.Conflict(err) {
					t.Errorf("Modify = %d, %v; want an error that is no conflict", rev, err)
				}
			case !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil):
				t.Errorf("Modify = %d, %v; want %v", rev, err, tt.wantErr)
			}
			if calls != tt.calls {
				t.Errorf("change called %d times, want %d", calls, tt.calls)
			}
			e, gerr := kv.Get(ctx, key)
			switch {
			case tt.want == "":
				if !errors.Is(gerr, jetstream.ErrKeyNotFound) {
					t.Errorf("after Modify: %v, want the key absent", gerr)
				}
				if err == nil && rev != 0 {
					t.Errorf("Modify = revision %d of an absent key, want 0", rev)
				}
			case gerr != nil:
				t.Fatalf("after Modify: %v", gerr)
			default:
				if string(e.Value()) != tt.want {
					t.Errorf("after Modify: %q, want %q", e.Value(), tt.want)
				}
				if moved := e.Revision() != before; moved != tt.written {
					t.Errorf("revision %d → %d, want written %v", before, e.Revision(), tt.written)
				}
				if err == nil && rev != e.Revision() {
					t.Errorf("Modify = revision %d, the key is at %d", rev, e.Revision())
				}
			}
		})
	}
}

// errAny stands for any error in a table.
var errAny = errors.New("any error")

// TestModifyLosesNoUpdate: writers racing on one key, each adding one
// to the count there, all count.
func TestModifyLosesNoUpdate(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	kv, err := b.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "RACE"})
	if err != nil {
		t.Fatal(err)
	}
	const writers, adds = 8, 20
	var calls atomic.Int64
	errs := make(chan error, writers*adds)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range adds {
				_, err := bus.Modify(ctx, kv, "count", func(old []byte, exists bool) ([]byte, error) {
					calls.Add(1)
					n := 0
					if exists {
						var err error
						if n, err = strconv.Atoi(string(old)); err != nil {
							return nil, err
						}
					}
					return []byte(strconv.Itoa(n + 1)), nil
				})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	e, err := kv.Get(ctx, "count")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(e.Value()); got != strconv.Itoa(writers*adds) {
		t.Errorf("count = %s after %d adds", got, writers*adds)
	}
	t.Logf("%d adds took %d changes", writers*adds, calls.Load())
}
