package bus

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
)

// Get reads key from kv within [CallTimeout], each try bounded by
// [RequestTry] and tried again while it fails for a transient reason: a
// read lost with the connection or the server it went through is never
// answered, and a turn waited out its whole bound for one when a node
// shut down. [jetstream.ErrKeyNotFound] is an answer, returned at once.
func Get(ctx context.Context, kv jetstream.KeyValue, key string) (jetstream.KeyValueEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	var e jetstream.KeyValueEntry
	err := RetryEach(ctx, backoff.Backoff{}, RequestTry, func(ctx context.Context) (err error) {
		e, err = kv.Get(ctx, key)
		return err
	}, nil)
	return e, err
}

// CompareAndSet writes value to key if the key is still at revision rev,
// and returns the new revision; rev 0 means the key must not exist (or be
// deleted). A key written since fails with an error matching
// [jetstream.ErrKeyExists], the caller's conflict to resolve by reading
// again.
func CompareAndSet(ctx context.Context, kv jetstream.KeyValue, key string, value []byte, rev uint64) (uint64, error) {
	if rev == 0 {
		return kv.Create(ctx, key, value)
	}
	return kv.Update(ctx, key, value, rev)
}
