package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/directget"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// bounded bounds one store operation by bus.CallTimeout: a turn's context
// lives for minutes, and a request lost while the client reconnects to
// another server must fail and be retried, not hold the turn until then.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, bus.CallTimeout)
}

// Store reads and writes sessions.
type Store struct {
	direct      *directget.Reader
	js          jetstream.JetStream
	space       subject.Space
	info        jetstream.KeyValue
	checkpoints jetstream.KeyValue
	// markerTTL is the life of a cleared checkpoint's marker, as the
	// bucket was provisioned (0: the bucket has no per-message TTLs).
	markerTTL time.Duration
	// cache holds loaded histories; nil without WithHistoryCache.
	cache *historyCache
}

// Option configures a Store.
type Option func(*Store)

// WithHistoryCache keeps the histories LoadHistory reads, up to maxBytes
// of decoded records and for a minute after a session's last load, so
// that a session's next load reads only what was appended since: for a
// worker, which loads a session's history on each of its turns. The
// records of a loaded History, and those passed to Append, are shared
// with the cache: callers must not change them.
func WithHistoryCache(maxBytes int64) Option {
	return func(s *Store) {
		if maxBytes > 0 {
			s.cache = newHistoryCache(maxBytes, historyIdle)
		}
	}
}

// Open returns the store of the fleet b belongs to; the layout must be
// provisioned.
func Open(ctx context.Context, b *bus.Bus, opts ...Option) (*Store, error) {
	info, err := b.KV(ctx, bus.BucketSessions)
	if err != nil {
		return nil, err
	}
	cps, err := b.KV(ctx, bus.BucketCheckpoints)
	if err != nil {
		return nil, err
	}
	st, err := cps.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("checkpoint bucket: %w", err)
	}
	s := &Store{direct: b.Direct, js: b.JS, space: b.Space, info: info, checkpoints: cps, markerTTL: st.LimitMarkerTTL()}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Turn is a stored turn record with its stream sequence.
type Turn struct {
	Seq    uint64
	Record *nanofleetv1.TurnRecord
}

// History is a session's turns after a cursor.
type History struct {
	// Turns since the history was last cleared, oldest first.
	Turns []Turn
	// LastSeq is the sequence of the session's last record (also before a
	// reset), the expected sequence of the next append; 0 when none.
	LastSeq uint64
}

// Find returns the turn that answered the inbound message at inboundSeq.
func (h *History) Find(inboundSeq uint64) *nanofleetv1.TurnRecord {
	for i := len(h.Turns) - 1; i >= 0; i-- {
		if h.Turns[i].Record.GetInboundSeq() == inboundSeq {
			return h.Turns[i].Record
		}
	}
	return nil
}

// LoadHistory reads the session's turns with a sequence above after.
// Turns before the newest record that clears the history (/new) are left out.
// With [WithHistoryCache], a session loaded before is read from where that
// load ended.
func (s *Store) LoadHistory(ctx context.Context, key string, after uint64) (*History, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	c, fresh, err := s.cached(ctx, key, after)
	if err != nil {
		return nil, err
	}
	if fresh {
		return c.history(after), nil
	}
	e, from := &cachedHistory{key: key, after: after}, after+1
	if c != nil {
		// A copy to read on into: an entry is never changed.
		e, from = c.above(after), c.last+1
	}
	// Each record is decoded as its page arrives: the raw messages of a
	// long history are never all held beside their decoded records.
	err = s.direct.Scan(ctx, s.space.HistoryStream(), s.space.History(key), from, 0, 0, func(m directget.Msg) error {
		rec := &nanofleetv1.TurnRecord{}
		if err := proto.Unmarshal(m.Data, rec); err != nil {
			return fmt.Errorf("record %d: %w", m.Seq, err)
		}
		e.records = append(e.records, recordRef{m.Seq, m.Header.Get(nats.MsgIdHdr)})
		e.last = m.Seq
		if rec.GetClearsHistory() {
			// The cleared turns are garbage now, not held by the array.
			clear(e.turns)
			e.turns, e.sizes, e.size = e.turns[:0], e.sizes[:0], 0
		}
		e.turns = append(e.turns, Turn{Seq: m.Seq, Record: rec})
		n := memSize(len(m.Data))
		e.sizes = append(e.sizes, n)
		e.size += n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load history of %s: %w", key, err)
	}
	if e.last == 0 && after > 0 {
		// Everything up to the cursor may be all there is; the next append
		// must still expect the true last sequence.
		last, err := s.lastSeq(ctx, key)
		if err != nil {
			return nil, err
		}
		e.last = last
	}
	if s.cache != nil && len(e.records) > 0 {
		s.cache.put(e)
	}
	return e.history(after), nil
}

// cached returns key's cache entry to read on from, and fresh when the
// stream holds no record after it; nil when there is none to trust: none
// cached, one loaded above a later cursor, or one whose first record
// above after is gone (a purge, or the stream's limits, which remove the
// oldest records first: that one still there means none after it went)
// or is another record (the stream deleted and made anew).
func (s *Store) cached(ctx context.Context, key string, after uint64) (c *cachedHistory, fresh bool, err error) {
	if s.cache == nil {
		return nil, false, nil
	}
	c = s.cache.get(key)
	if c == nil || after < c.after {
		return nil, false, nil
	}
	i := c.recordsAbove(after)
	if i == len(c.records) {
		// Nothing above the cursor was cached: reading it costs no more.
		return nil, false, nil
	}
	// One request says both whether that record is still there and how
	// many follow it: as many as are cached means nothing to read.
	first := c.records[i]
	m, more, ok, err := s.direct.Next(ctx, s.space.HistoryStream(), s.space.History(key), first.seq)
	if err != nil {
		return nil, false, fmt.Errorf("load history of %s: %w", key, err)
	}
	if !ok || m.Seq != first.seq || m.Header.Get(nats.MsgIdHdr) != first.id {
		s.cache.drop(key)
		return nil, false, nil
	}
	fresh = more == uint64(len(c.records)-i-1)
	if fresh && i > 0 {
		// The cursor moved past some: keep only what is above it.
		c = c.above(after)
		s.cache.put(c)
	}
	return c, fresh, nil
}

func (s *Store) lastSeq(ctx context.Context, key string) (uint64, error) {
	m, _, err := s.last(ctx, key)
	return m.Seq, err
}

// last reads the session's newest history message by direct get, not
// js.Stream(...).GetLastMsgForSubject: that asks for the stream's info
// first, a second request on the FIFO guard's path.
func (s *Store) last(ctx context.Context, key string) (directget.Msg, bool, error) {
	m, ok, err := s.direct.Last(ctx, s.space.HistoryStream(), s.space.History(key))
	if err != nil {
		return directget.Msg{}, false, fmt.Errorf("last record of %s: %w", key, err)
	}
	return m, ok, nil
}

// LastTurn returns the session's newest turn record, or nil when it has
// none.
func (s *Store) LastTurn(ctx context.Context, key string) (*nanofleetv1.TurnRecord, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	m, ok, err := s.last(ctx, key)
	if err != nil || !ok {
		return nil, err
	}
	rec := &nanofleetv1.TurnRecord{}
	if err := proto.Unmarshal(m.Data, rec); err != nil {
		return nil, fmt.Errorf("last record of %s: %w", key, err)
	}
	return rec, nil
}

// Append commits rec as the session's next turn, provided the session's
// last record is still expectLast (0: no record yet). It returns the new
// record's sequence, or ErrConflict.
func (s *Store) Append(ctx context.Context, key string, rec *nanofleetv1.TurnRecord, expectLast uint64) (uint64, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	data, err := proto.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("encode turn: %w", err)
	}
	msg := nats.NewMsg(s.space.History(key))
	msg.Data = data
	// The turn id makes a retried append after a lost ack a no-op.
	id := "turn:" + rec.GetTurnId()
	msg.Header.Set(nats.MsgIdHdr, id)
	ack, err := bus.PublishMsg(ctx, s.js, msg, jetstream.WithExpectLastSequencePerSubject(expectLast))
	if err != nil {
		if wrongLastSequence(err) {
			// What was cached is not the history's end: read it anew.
			if s.cache != nil {
				s.cache.drop(key)
			}
			return 0, fmt.Errorf("%w: history of %s moved past %d", ErrConflict, key, expectLast)
		}
		return 0, fmt.Errorf("append turn to %s: %w", key, err)
	}
	if s.cache != nil {
		s.cache.extend(key, expectLast, Turn{Seq: ack.Sequence, Record: rec}, id, memSize(len(data)))
	}
	return ack.Sequence, nil
}

// Info reads the session's metadata and its revision; a session never
// written returns an empty record and revision 0.
func (s *Store) Info(ctx context.Context, key string) (*nanofleetv1.SessionInfo, uint64, error) {
	info := &nanofleetv1.SessionInfo{}
	e, err := bus.GetProto(ctx, s.info, subject.Token(key), info)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return &nanofleetv1.SessionInfo{SessionKey: key}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read session %s: %w", key, err)
	}
	return info, e.Revision(), nil
}

// PutInfo writes the session's metadata if its revision is still rev
// (0: not yet written). It returns the new revision, or ErrConflict.
func (s *Store) PutInfo(ctx context.Context, info *nanofleetv1.SessionInfo, rev uint64) (uint64, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	data, err := proto.Marshal(info)
	if err != nil {
		return 0, fmt.Errorf("encode session: %w", err)
	}
	k := subject.Token(info.GetSessionKey())
	rev, err = bus.CompareAndSet(ctx, s.info, k, data, rev)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, fmt.Errorf("%w: session %s", ErrConflict, info.GetSessionKey())
	}
	if err != nil {
		return 0, fmt.Errorf("write session %s: %w", info.GetSessionKey(), err)
	}
	return rev, nil
}

// UpdateInfo applies change to the session's metadata with compare-and-set,
// retrying on conflict.
func (s *Store) UpdateInfo(ctx context.Context, key string, change func(*nanofleetv1.SessionInfo)) (*nanofleetv1.SessionInfo, error) {
	for {
		info, rev, err := s.Info(ctx, key)
		if err != nil {
			return nil, err
		}
		change(info)
		if _, err = s.PutInfo(ctx, info, rev); err == nil {
			return info, nil
		}
		if !errors.Is(err, ErrConflict) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// Checkpoint returns the session's turn in progress, or ErrNotFound.
func (s *Store) Checkpoint(ctx context.Context, key string) (*nanofleetv1.TurnCheckpoint, uint64, error) {
	cp := &nanofleetv1.TurnCheckpoint{}
	e, err := bus.GetProto(ctx, s.checkpoints, subject.Token(key), cp)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read checkpoint of %s: %w", key, err)
	}
	return cp, e.Revision(), nil
}

// SaveCheckpoint stores cp and returns its revision. The lease already
// makes the caller the only writer, so a plain put is enough.
func (s *Store) SaveCheckpoint(ctx context.Context, key string, cp *nanofleetv1.TurnCheckpoint) (uint64, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	data, err := proto.Marshal(cp)
	if err != nil {
		return 0, fmt.Errorf("encode checkpoint: %w", err)
	}
	rev, err := s.checkpoints.Put(ctx, subject.Token(key), data)
	if err != nil {
		return 0, fmt.Errorf("save checkpoint of %s: %w", key, err)
	}
	return rev, nil
}

// ClearCheckpoint removes the session's checkpoint if it is still the
// revision rev the caller saved. A turn clears its checkpoint after it has
// released the session, so the next turn may already have saved its own,
// which must stay.
func (s *Store) ClearCheckpoint(ctx context.Context, key string, rev uint64) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	opts := []jetstream.KVDeleteOpt{jetstream.LastRevision(rev)}
	if s.markerTTL > 0 {
		opts = append(opts, jetstream.PurgeTTL(s.markerTTL))
	}
	err := s.checkpoints.Purge(ctx, subject.Token(key), opts...)
	if err == nil || errors.Is(err, jetstream.ErrKeyNotFound) || wrongLastSequence(err) {
		return nil // gone, or a newer turn's checkpoint
	}
	return fmt.Errorf("clear checkpoint of %s: %w", key, err)
}

// wrongLastSequence reports the server's refusal of a write that expected
// another last sequence on its subject (an optimistic-concurrency loss).
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}
