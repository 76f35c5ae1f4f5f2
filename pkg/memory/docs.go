package memory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/textcut"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Docs reads and writes the scopes' MemoryDocs in the memory bucket.
type Docs struct {
	kv jetstream.KeyValue
	nc *nats.Conn
}

// OpenDocs returns the documents of the fleet b belongs to.
func OpenDocs(ctx context.Context, b *bus.Bus) (*Docs, error) {
	kv, err := b.KV(ctx, bus.BucketMemory)
	if err != nil {
		return nil, err
	}
	return &Docs{kv: kv, nc: b.NC}, nil
}

// Get returns the scope's document and its revision; a scope never written
// (or deleted) returns an empty document and revision 0.
func (d *Docs) Get(ctx context.Context, s Scope) (*nanofleetv1.MemoryDoc, uint64, error) {
	doc, e, err := d.Entry(ctx, s)
	if errors.Is(err, ErrNotFound) {
		return &nanofleetv1.MemoryDoc{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return doc, e.Revision(), nil
}

// Put writes the scope's document if its revision is still rev (0: not yet
// written). It returns the new revision, or ErrConflict.
func (d *Docs) Put(ctx context.Context, s Scope, doc *nanofleetv1.MemoryDoc, rev uint64) (uint64, error) {
	data, err := proto.Marshal(doc)
	if err != nil {
		return 0, fmt.Errorf("encode memory: %w", err)
	}
	rev, err = bus.CompareAndSet(ctx, d.kv, DocKey(s), data, rev)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, fmt.Errorf("%w: memory of %s", ErrConflict, s)
	}
	if bus.TooLarge(err) {
		return 0, fmt.Errorf("%w: memory of %s, %d bytes: %w", ErrTooLarge, s, len(data), err)
	}
	if err != nil {
		return 0, fmt.Errorf("write memory of %s: %w", s, err)
	}
	return rev, nil
}

// Fits returns nil if [Docs.Put] can store doc as the scope's document,
// else an error wrapping ErrTooLarge that names its size and the limit:
// the server's max payload or the bucket's max value size, less room for
// the write's headers. It lets a writer refuse what the bus would refuse
// before it commits to anything else.
func (d *Docs) Fits(ctx context.Context, s Scope, doc *nanofleetv1.MemoryDoc) error {
	st, err := d.kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("memory bucket status: %w", err)
	}
	return fits(d.nc, int64(st.Config().MaxValueSize), "memory of "+s.String(), proto.Size(doc))
}

// SetContent replaces the scope's MEMORY.md with compare-and-set
// ([bus.Modify]: a write that lost is read and made again); the recent
// entries and markers stay. It returns the content before and the new
// revision.
func (d *Docs) SetContent(ctx context.Context, s Scope, content, by string) (before string, rev uint64, err error) {
	size := 0
	rev, err = bus.Modify(ctx, d.kv, DocKey(s), func(old []byte, _ bool) ([]byte, error) {
		doc := &nanofleetv1.MemoryDoc{}
		if err := proto.Unmarshal(old, doc); err != nil {
			return nil, fmt.Errorf("decode memory of %s: %w", s, err)
		}
		before = doc.GetContent()
		doc.Content = content
		doc.UpdatedBy = by
		doc.UpdatedAt = timestamppb.Now()
		data, err := proto.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("encode memory: %w", err)
		}
		size = len(data)
		return data, nil
	})
	switch {
	case err == nil:
		return before, rev, nil
	case bus.Conflict(err):
		return "", 0, fmt.Errorf("%w: memory of %s: %w", ErrConflict, s, err)
	case bus.TooLarge(err):
		return "", 0, fmt.Errorf("%w: memory of %s, %d bytes: %w", ErrTooLarge, s, size, err)
	}
	return "", 0, fmt.Errorf("write memory of %s: %w", s, err)
}

// Watch watches one scope's document.
func (d *Docs) Watch(ctx context.Context, s Scope) (jetstream.KeyWatcher, error) {
	w, err := d.kv.Watch(ctx, DocKey(s))
	if err != nil {
		return nil, fmt.Errorf("watch memory of %s: %w", s, err)
	}
	return w, nil
}

// Entry returns a scope's document with its KV entry, for its revision
// and time; ErrNotFound when there is none.
func (d *Docs) Entry(ctx context.Context, s Scope) (*nanofleetv1.MemoryDoc, jetstream.KeyValueEntry, error) {
	doc := &nanofleetv1.MemoryDoc{}
	e, err := bus.GetProto(ctx, d.kv, DocKey(s), doc)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil, fmt.Errorf("%w: memory of %s", ErrNotFound, s)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read memory of %s: %w", s, err)
	}
	return doc, e, nil
}

// AppliedUpTo returns how far the session's turns were applied to doc.
func AppliedUpTo(doc *nanofleetv1.MemoryDoc, sessionKey string) uint64 {
	var to uint64
	for _, a := range doc.GetApplied() {
		if a.GetSessionKey() == sessionKey && a.GetToSeq() > to {
			to = a.GetToSeq()
		}
	}
	return to
}

// MarkApplied records in doc that the session's turns up to toSeq are
// applied, and drops markers older than keep.
func MarkApplied(doc *nanofleetv1.MemoryDoc, sessionKey string, toSeq uint64, now time.Time, keep time.Duration) {
	kept := doc.Applied[:0]
	for _, a := range doc.GetApplied() {
		if a.GetSessionKey() == sessionKey || now.Sub(a.GetAt().AsTime()) > keep {
			continue
		}
		kept = append(kept, a)
	}
	doc.Applied = append(kept, &nanofleetv1.AppliedRange{SessionKey: sessionKey, ToSeq: toSeq, At: timestamppb.New(now)})
}

// PushRecent appends e to doc's recent entries, clipping its text to
// maxChars and keeping at most keep entries.
func PushRecent(doc *nanofleetv1.MemoryDoc, e *nanofleetv1.HistoryEntry, keep, maxChars int) {
	c := proto.Clone(e).(*nanofleetv1.HistoryEntry)
	c.Text = textcut.Clip(c.GetText(), maxChars)
	doc.Recent = append(doc.Recent, c)
	if over := len(doc.Recent) - keep; over > 0 {
		doc.Recent = doc.Recent[over:]
	}
}
