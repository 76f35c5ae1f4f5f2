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
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

var (
	// ErrHeld means another holder has the lease.
	ErrHeld = errors.New("lease: held by another")
	// ErrLost means the lease expired or was taken over before renewal.
	ErrLost = errors.New("lease: lost")
)

// callTimeout bounds one lease operation, so that a request lost while
// the client reconnects fails instead of hanging the holder.
const callTimeout = 10 * time.Second

// Table hands out leases from one KV bucket.
type Table struct {
	kv jetstream.KeyValue
}

// NewTable returns leases kept in kv; the bucket's TTL is the lease TTL.
func NewTable(kv jetstream.KeyValue) *Table { return &Table{kv: kv} }

// Lease is a held lease.
type Lease struct {
	t     *Table
	key   string
	owner []byte
	rev   uint64
}

// Acquire takes the lease key for owner, or returns ErrHeld. A lease
// still held under owner's name is taken over: owner restarted after a
// crash, and nobody else can be working under its name. Owner names must
// therefore be unique among live holders.
func (t *Table) Acquire(ctx context.Context, key, owner string) (*Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	rev, err := t.kv.Create(ctx, key, []byte(owner))
	if errors.Is(err, jetstream.ErrKeyExists) {
		e, gerr := t.kv.Get(ctx, key)
		if gerr == nil && string(e.Value()) == owner {
			if rev, err = t.kv.Update(ctx, key, []byte(owner), e.Revision()); err == nil {
				return &Lease{t: t, key: key, owner: []byte(owner), rev: rev}, nil
			}
		}
		return nil, fmt.Errorf("%w: %s", ErrHeld, key)
	}
	if err != nil {
		return nil, fmt.Errorf("acquire lease %s: %w", key, err)
	}
	return &Lease{t: t, key: key, owner: []byte(owner), rev: rev}, nil
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
// may now hold it: the caller must stop its work.
func (l *Lease) Renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	rev, err := l.t.kv.Update(ctx, l.key, l.owner, l.rev)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("%w: %s", ErrLost, l.key)
		}
		return fmt.Errorf("renew lease %s: %w", l.key, err)
	}
	l.rev = rev
	return nil
}

// Release gives the lease up if it is still ours.
func (l *Lease) Release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err := l.t.kv.Delete(ctx, l.key, jetstream.LastRevision(l.rev))
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("release lease %s: %w", l.key, err)
	}
	return nil
}
