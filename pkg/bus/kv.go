package bus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

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

// GetProto reads key from kv as [Get] does and decodes its value into msg;
// the entry gives the revision and time. A value that does not decode is
// an error naming the key, never an empty msg taken for the real one.
func GetProto(ctx context.Context, kv jetstream.KeyValue, key string, msg proto.Message) (jetstream.KeyValueEntry, error) {
	e, err := Get(ctx, kv, key)
	if err != nil {
		return nil, err
	}
	if err := proto.Unmarshal(e.Value(), msg); err != nil {
		return nil, fmt.Errorf("decode %s: %w", key, err)
	}
	return e, nil
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
