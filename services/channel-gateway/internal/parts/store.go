package parts

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/subject"
)

// Store counts sent pieces per reply id in a KV bucket that every
// gateway shares (the gateway's delivered bucket), so a reply redelivered
// after a lost ack, to this gateway or another, continues after the
// pieces already sent. It is for platforms without an idempotency key,
// where a piece sent twice is shown twice. Records last as long as the
// bucket keeps keys.
type Store struct {
	kv jetstream.KeyValue
}

// NewStore returns a store keeping its records in kv.
func NewStore(kv jetstream.KeyValue) *Store { return &Store{kv: kv} }

// key is distinct from the gateway's own keys in the bucket ("id-…").
func key(id string) string { return "parts-" + subject.Token(id) }

// Sent returns how many pieces of id were sent; a reply without an id is
// not tracked.
func (s *Store) Sent(ctx context.Context, id string) (int, error) {
	if id == "" {
		return 0, nil
	}
	e, err := s.kv.Get(ctx, key(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("parts: read %s: %w", id, err)
	}
	n, err := strconv.Atoi(string(e.Value()))
	if err != nil {
		return 0, fmt.Errorf("parts: record of %s: %w", id, err)
	}
	return n, nil
}

// Mark records that n pieces of id were sent.
func (s *Store) Mark(ctx context.Context, id string, n int) error {
	if id == "" {
		return nil
	}
	if _, err := s.kv.Put(ctx, key(id), []byte(strconv.Itoa(n))); err != nil {
		return fmt.Errorf("parts: record %s: %w", id, err)
	}
	return nil
}
