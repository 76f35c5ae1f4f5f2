// Package lease gives one holder at a time a named lease kept in a
// JetStream KV bucket whose entries expire (the bucket's TTL). A holder
// renews its lease while it works; if it dies, the lease expires and
// another can take it. Renewal and release are compare-and-set on the
// entry's revision, so a holder that lost its lease learns so and can
// never release someone else's.
package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/subject"
)

// callTimeout bounds one lease operation, so that a request lost while
// the client reconnects fails instead of hanging the holder: the bus's
// bound for one call.
const callTimeout = bus.CallTimeout

// retryWait is the wait between writes sent while the bucket has no
// leader; tryTimeout bounds one try, so that a renewal or release lost
// with a node that stopped is sent again within the call's time.
//
// tryTimeout is shorter than bus.RequestTry (3 s) for the lease TTL's
// sake: holders renew every third of the TTL and a renewal gives up a
// fifth of the TTL before the lease may expire ([Table.renewUntil]), so
// its tries share 7/15 of the TTL, 14 s at the default 30 s: six tries of
// 2 s, four of 3 s. A release (callTimeout, 10 s) gets five, not three.
const (
	retryWait  = 250 * time.Millisecond
	tryTimeout = 2 * time.Second
)

// releasedMax bounds Table.released, which is emptied when full: it only
// spares requests.
const releasedMax = 4096

// Table hands out leases from one KV bucket.
type Table struct {
	kv  jetstream.KeyValue
	pub jetstream.Publisher // nil: releases go through kv.Delete

	mu sync.Mutex
	// released is the revision of the delete marker this table's last
	// release of a key wrote (known only with a publisher).
	released map[string]uint64
	// ttl is the bucket's TTL, read at the first Acquire. While it is
	// not known, a renewal is tried for callTimeout at most.
	ttl      time.Duration
	ttlKnown bool
}

// Option configures a Table.
type Option func(*Table)

// WithPublisher makes releases publish the key's delete marker through
// js, the JetStream of kv's bucket, so that the table learns the marker's
// revision: taking the same key again is then one request instead of
// three (kv.Create's failed create, read of the marker and update). The
// marker is the one kv.Delete writes. A js with a domain or an API prefix
// is ignored (kv.Delete is used): its KV subjects are not the plain ones.
func WithPublisher(js jetstream.JetStream) Option {
	return func(t *Table) {
		o := js.Options()
		if o.Domain == "" && (o.APIPrefix == "" || o.APIPrefix == jetstream.DefaultAPIPrefix) {
			t.pub = js
		}
	}
}

// NewTable returns leases kept in kv; the bucket's TTL is the lease TTL.
func NewTable(kv jetstream.KeyValue, opts ...Option) *Table {
	t := &Table{kv: kv}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Lease is a held lease.
type Lease struct {
	t     *Table
	key   string
	owner []byte
	rev   uint64
	// written is when the write of rev was sent: the entry, stored
	// after that, expires no sooner than written + the bucket's TTL.
	written time.Time
}

// Acquire takes the lease key for owner, or returns ErrHeld. A lease
// still held under owner's name is taken over: owner restarted after a
// crash, and nobody else can be working under its name. Owner names must
// therefore be unique among live holders.
func (t *Table) Acquire(ctx context.Context, key, owner string) (*Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	t.learnTTL(ctx)
	// Each try is bounded: a request lost with the connection or the
	// server it went through is never answered, and the turn behind this
	// call waited out all of callTimeout (a node's restart under load).
	// Trying again is safe: a try that was applied though its answer was
	// lost left the key under owner's name, which the next one takes over.
	var l *Lease
	err := bus.RetryEach(ctx, backoff.Backoff{}, bus.RequestTry, func(ctx context.Context) (err error) {
		l, err = t.acquire(ctx, key, owner)
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (t *Table) acquire(ctx context.Context, key, owner string) (*Lease, error) {
	l := &Lease{t: t, key: key, owner: []byte(owner), written: time.Now()}
	if rev, ok := t.takeReleased(key); ok {
		// Our delete marker still the key's last revision means the key is
		// free, which is what Create finds out in three requests.
		if rev, err := t.kv.Update(ctx, key, l.owner, rev); err == nil {
			l.rev = rev
			return l, nil
		}
		// Written since, or expired: Create tells which.
	}
	rev, err := t.kv.Create(ctx, key, l.owner)
	if errors.Is(err, jetstream.ErrKeyExists) {
		e, gerr := t.kv.Get(ctx, key)
		if gerr != nil && bus.Transient(gerr) {
			return nil, fmt.Errorf("acquire lease %s: %w", key, gerr)
		}
		if gerr == nil && string(e.Value()) == owner {
			if rev, err = t.kv.Update(ctx, key, l.owner, e.Revision()); err == nil {
				l.rev = rev
				return l, nil
			}
		}
		return nil, fmt.Errorf("%w: %s", ErrHeld, key)
	}
	if err != nil {
		return nil, fmt.Errorf("acquire lease %s: %w", key, err)
	}
	l.rev = rev
	return l, nil
}

// learnTTL reads the bucket's TTL once; a failed read is tried again at
// the next Acquire.
func (t *Table) learnTTL(ctx context.Context) {
	t.mu.Lock()
	known := t.ttlKnown
	t.mu.Unlock()
	if known {
		return
	}
	st, err := t.kv.Status(ctx)
	if err != nil {
		return
	}
	t.mu.Lock()
	t.ttl, t.ttlKnown = st.TTL(), true
	t.mu.Unlock()
}

// renewUntil is when a renewal of a lease written at written stops
// trying: a fifth of the TTL before the entry may expire, so that the
// holder stops its work before anyone else can take the lease.
func (t *Table) renewUntil(written time.Time) time.Time {
	t.mu.Lock()
	ttl, known := t.ttl, t.ttlKnown
	t.mu.Unlock()
	if !known || ttl <= 0 {
		// Unknown, or entries that never expire: the call's own bound.
		return time.Now().Add(callTimeout)
	}
	return written.Add(ttl - ttl/5)
}

// Holder returns who holds key, or "" when nobody does.
func (t *Table) Holder(ctx context.Context, key string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	e, err := t.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read lease %s: %w", key, err)
	}
	return string(e.Value()), nil
}

// Key is the leased name.
func (l *Lease) Key() string { return l.key }

// Renew extends the lease by the bucket TTL. ErrLost means someone else
// may now hold it: the caller must stop its work; so must any other
// error, returned once the lease may be about to expire.
//
// A renewal the bucket does not answer (its leader is being elected, or
// the try was lost with a node that stopped) is sent again while the
// lease surely still holds: a turn, a channel connection or a
// consolidation then outlives a leader election instead of ending at its
// first renewal. A try that went unanswered may have been stored; the
// next one then fails the compare-and-set, and the entry tells whether
// it was ours (owner names are unique among live holders).
func (l *Lease) Renew(ctx context.Context) error {
	until := l.t.renewUntil(l.written)
	parent := ctx
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	var unanswered time.Time // when the first try that may have been stored was sent
	resend := backoff.Retry{Again: bus.Transient, Wait: func(int) time.Duration { return retryWait }}
	err := resend.Do(ctx, func(ctx context.Context) error {
		sent := time.Now()
		// The try's own bound, not the Retry's: a conflict after an
		// unanswered try reads the entry with a bound of its own.
		tctx, tcancel := context.WithTimeout(ctx, tryTimeout)
		rev, err := l.t.put(tctx, l.key, l.owner, l.rev)
		tcancel()
		if errors.Is(err, errConflict) && !unanswered.IsZero() {
			rev, err = l.storedByUs(ctx)
			if err == nil {
				sent = unanswered
			}
		}
		if err == nil {
			l.rev, l.written = rev, sent
			return nil
		}
		if unanswered.IsZero() && errors.Is(err, context.DeadlineExceeded) {
			unanswered = sent
		}
		return err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errConflict):
		return fmt.Errorf("%w: %s", ErrLost, l.key)
	case parent.Err() != nil && errors.Is(err, parent.Err()):
		return fmt.Errorf("renew lease %s: %w", l.key, parent.Err())
	case !bus.Transient(err):
		return fmt.Errorf("renew lease %s: %w", l.key, err)
	}
	return fmt.Errorf("renew lease %s: not stored by %s, when it may be about to expire: %w", l.key, until.Format(time.TimeOnly), err)
}

// errConflict is a compare-and-set that found another revision.
var errConflict = errors.New("lease: revision changed")

// put writes owner to key if rev is still its last revision, and returns
// the new revision, or errConflict.
func (t *Table) put(ctx context.Context, key string, owner []byte, rev uint64) (uint64, error) {
	var err error
	if t.pub == nil {
		rev, err = t.kv.Update(ctx, key, owner, rev)
	} else {
		// What kv.Update sends, through the publisher.
		m := nats.NewMsg(subject.KVKey(t.kv.Bucket(), key))
		m.Data = owner
		var ack *jetstream.PubAck
		if ack, err = t.pub.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev)); err == nil {
			rev = ack.Sequence
		}
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound) || wrongLastSeq(err) {
		return 0, errConflict
	}
	return rev, err
}

// storedByUs returns the key's revision if its entry is this lease's
// owner written after l.rev (a try whose answer was lost), or errConflict.
func (l *Lease) storedByUs(ctx context.Context) (uint64, error) {
	tctx, cancel := context.WithTimeout(ctx, tryTimeout)
	defer cancel()
	e, err := l.t.kv.Get(tctx, l.key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, errConflict
	case err != nil:
		return 0, err
	case e.Revision() > l.rev && e.Operation() == jetstream.KeyValuePut && string(e.Value()) == string(l.owner):
		return e.Revision(), nil
	}
	return 0, errConflict
}

// Release gives the lease up if it is still ours.
func (l *Lease) Release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if l.t.pub == nil {
		err := l.t.kv.Delete(ctx, l.key, jetstream.LastRevision(l.rev))
		if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("release lease %s: %w", l.key, err)
		}
		return nil
	}
	m := nats.NewMsg(subject.KVKey(l.t.kv.Bucket(), l.key))
	m.Header.Set(kvOperation, kvDelete)
	// Sent again, until ctx ends, while the bucket has no leader (its
	// node died and the others are electing one; every retryWait) and
	// when a try goes unanswered (lost with a node that stopped): a
	// release lost so kept the session from its next turn until the
	// lease expired (30 s). The compare-and-set makes a repeated release
	// harmless: one that finds the first applied is not ours any more.
	resend := backoff.Retry{Try: tryTimeout, Again: func(err error) bool {
		return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrNoStreamResponse)
	}}
	err := resend.Do(ctx, func(ctx context.Context) error {
		ack, err := l.t.pub.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(l.rev),
			jetstream.WithRetryWait(retryWait), jetstream.WithRetryAttempts(int(tryTimeout/retryWait)))
		switch {
		case err == nil:
			l.t.remember(l.key, ack.Sequence)
			return nil
		case wrongLastSeq(err):
			return nil // not ours any more
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("release lease %s: %w", l.key, err)
	}
	return nil
}

// The delete marker of a KV entry, as nats.go's kv.Delete writes it.
const (
	kvOperation = "KV-Operation"
	kvDelete    = "DEL"
)

// wrongLastSeq reports whether err is a compare-and-set conflict
// (replicated streams report it under another code).
func wrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

func (t *Table) remember(key string, rev uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.released == nil || len(t.released) >= releasedMax {
		t.released = make(map[string]uint64)
	}
	t.released[key] = rev
}

// takeReleased returns and forgets the revision of key's delete marker
// this table wrote last.
func (t *Table) takeReleased(key string) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rev, ok := t.released[key]
	delete(t.released, key)
	return rev, ok
}
