package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

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

// Modify changes key's value in kv by compare-and-set, within
// [CallTimeout], and returns the new revision: it reads the value (nil,
// exists false, when the key is missing or deleted), asks change for the
// new one and writes it at the revision it read. A value equal to the one
// there is not written (the revision read is returned), and [ErrDelete]
// deletes the key (revision 0). A write that lost to another (the key
// changed since it was read) is read and changed again after a short
// jittered wait, and so is a failure that is [Transient], each try
// bounded by [RequestTry]; any other error, change's own included, is
// returned at once as it is. change may thus run more than once, each
// time on the value then current; a write whose answer was lost may have
// landed, and its retry then changes its own result again. When the time
// runs out while writes keep losing, the error matches [Conflict] and
// ctx's error both.
func Modify(ctx context.Context, kv jetstream.KeyValue, key string, change func(old []byte, exists bool) ([]byte, error)) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	var rev uint64
	var changeErr error // change's own: never tried again
	var transient bool  // the last failure was transient, not a lost write
	again := func(err error) bool {
		transient = Transient(err)
		return changeErr == nil && (transient || Conflict(err))
	}
	wait := func(n int) time.Duration {
		if transient {
			return backoff.Backoff{}.Wait(n)
		}
		// From 1 ms doubling to 50 ms, jittered: writers of one key take
		// turns instead of all trying again at once.
		return backoff.Backoff{Min: time.Millisecond, Max: 50 * time.Millisecond}.Wait(n)
	}
	err := backoff.Retry{Try: RequestTry, Again: again, Wait: wait}.Do(ctx, func(ctx context.Context) error {
		// kv.Get, not Get: this try is bounded and tried again already.
		var old []byte
		rev = 0
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			old, rev = e.Value(), e.Revision()
		}
		value, err := change(old, rev != 0)
		switch {
		case errors.Is(err, ErrDelete):
			if rev == 0 {
				return nil
			}
			err = kv.Delete(ctx, key, jetstream.LastRevision(rev))
			rev = 0
			return err
		case err != nil:
			changeErr = err
			return err
		case rev != 0 && bytes.Equal(value, old):
			return nil
		}
		rev, err = CompareAndSet(ctx, kv, key, value, rev)
		return err
	})
	if changeErr != nil {
		return 0, changeErr
	}
	if err != nil {
		return 0, err
	}
	return rev, nil
}

// Conflict reports whether err is a compare-and-set that lost: the key
// was written since it was read ([jetstream.ErrKeyExists] from a create,
// [jetstream.ErrKeyRevisionMismatch] from an update or a delete).
func Conflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}
