package editstream

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/metakey"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
)

// Start is where delivering the pieces (n of them) of msg starts: after
// those the fleet already sent (sent counts them), or after the first
// when none was and the streamed message became it (see Finish), which
// sent then counts. A nil s streams nothing. Its errors are sent's.
func (s *Streams) Start(ctx context.Context, msg *nanofleetv1.OutboundMessage, n int, sent *parts.Store) (int, error) {
	start, err := sent.Sent(ctx, msg.GetId())
	if err != nil {
		return 0, err
	}
	if s != nil && start == 0 && msg.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL && n > 0 && s.Finish(ctx, msg) {
		start = 1
		if err := sent.Mark(context.WithoutCancel(ctx), msg.GetId(), 1); err != nil {
			s.log.Warn("streamed piece not recorded; a redelivery would send it again", "id", msg.GetId(), "err", err)
		}
	}
	return start, nil
}

// Finish reports whether the first piece of msg, a final answer, was
// delivered by editing the streamed message, waiting for the stream's
// owner (this gateway or another) to say. When false (no stream, the
// stream failed, or its owner did not report in time) the caller sends
// the answer as usual.
func (s *Streams) Finish(ctx context.Context, msg *nanofleetv1.OutboundMessage) bool {
	k := s.key(msg)
	s.mu.Lock()
	st := s.live[k]
	if st == nil {
		st = s.ended[k]
	}
	s.mu.Unlock()
	if st != nil && st.first == nil {
		st = nil // a turn ended without deltas here
	}
	ctx, cancel := context.WithTimeout(ctx, s.wait)
	defer cancel()
	if st != nil {
		select {
		case <-st.claimed:
		case <-ctx.Done():
			return false
		}
		st.mu.Lock()
		owner := st.owner
		st.mu.Unlock()
		if owner {
			select {
			case <-st.settled:
			case <-ctx.Done():
				return false
			}
			st.mu.Lock()
			defer st.mu.Unlock()
			return st.ok
		}
	}
	// Another gateway owns the stream, or this one saw none: ask the
	// bucket.
	e, err := bus.Get(ctx, s.kv, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) && st == nil && msg.GetMetadata()[metakey.Streamed] != "true" {
		return false // no stream anywhere
	}
	// An answer the worker streamed whose entry is not there yet: its
	// deltas reach this gateway, or the owner's entry the bucket, after
	// the reply did (a loaded gateway); wait for it as for any owner.
	if err == nil && ended(e) {
		return state(e) == "done"
	}
	w, err := s.kv.Watch(ctx, k)
	if err != nil {
		return false
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e := <-w.Updates():
			if e != nil && ended(e) {
				return state(e) == "done"
			}
		case <-ctx.Done():
			s.log.Info("no word from the gateway streaming this answer; sending it whole", "key", k)
			return false
		}
	}
}

func state(e jetstream.KeyValueEntry) string {
	var v entry
	_ = json.Unmarshal(e.Value(), &v)
	return v.State
}

func ended(e jetstream.KeyValueEntry) bool {
	st := state(e)
	return st == "done" || st == "failed"
}
