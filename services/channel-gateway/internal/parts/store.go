// Package parts remembers, fleet-wide, how many pieces of a split reply a
// platform already took, so that a reply delivered again — retried after
// a failed piece, or redelivered to another gateway after a lost ack or a
// gateway stop — continues after them instead of showing them twice.
//
// The count lives in the gateway's delivered bucket (key parts-<id>),
// which every gateway shares; it is written after each piece, before the
// next starts. Most platforms have no idempotency key for a message
// (Telegram, Slack, WhatsApp, DingTalk), and those that do (Feishu's
// uuid, Discord's nonce) keep it only for a while, so every adapter counts
// its pieces here.
package parts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// Store counts sent pieces per reply id in a KV bucket that every
// gateway shares. Records last as long as the bucket keeps keys.
type Store struct {
	kv  jetstream.KeyValue
	log *slog.Logger
}

// Option changes a Store.
type Option func(*Store)

// WithLogger sets the logger of pieces sent but not recorded; the default,
// and nil, discard.
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = observe.OrDiscard(l) } }

// NewStore returns a store keeping its records in kv.
func NewStore(kv jetstream.KeyValue, opts ...Option) *Store {
	s := &Store{kv: kv, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Open returns a store in the gateway's delivered bucket
// ([gateway.Assets] must have been provisioned).
func Open(ctx context.Context, b *bus.Bus, opts ...Option) (*Store, error) {
	kv, err := b.KV(ctx, gateway.BucketDelivered)
	if err != nil {
		return nil, fmt.Errorf("parts: %w", err)
	}
	return NewStore(kv, opts...), nil
}

// key is distinct from the gateway's own keys in the bucket ("id-…").
func key(id string) string { return "parts-" + subject.Token(id) }

// Sent returns how many pieces of id were sent; a reply without an id is
// not tracked. Its errors are delivery errors: a failed read is worth a
// retry, a record that is not a count is not.
func (s *Store) Sent(ctx context.Context, id string) (int, error) {
	if id == "" {
		return 0, nil
	}
	e, err := bus.Get(ctx, s.kv, key(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, gateway.Retry(fmt.Errorf("parts: read %s: %w", id, err), 0)
	}
	n, err := strconv.Atoi(string(e.Value()))
	if err != nil {
		return 0, gateway.Permanent(fmt.Errorf("parts: record of %s: %w", id, err))
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

// sendTimeout bounds one piece's send once ctx has ended.
const sendTimeout = 30 * time.Second

// Send calls send(i) for the pieces of id from start to n-1, in order
// (start is usually Sent(id)), recording each piece the platform took
// before the next starts; it returns send's first error. ctx ending (the
// gateway stopping) does not cut off the piece in flight, which the
// platform may already show: it is finished, within ctx's deadline or
// sendTimeout, and recorded, and Send returns a retry before the next.
func (s *Store) Send(ctx context.Context, id string, start, n int, send func(ctx context.Context, i int) error) error {
	for i := start; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return gateway.Retry(fmt.Errorf("parts: piece %d of %s: %w", i, id, err), 0)
		}
		timeout := sendTimeout
		if d, ok := ctx.Deadline(); ok {
			timeout = min(timeout, time.Until(d))
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		err := send(sctx, i)
		if err == nil {
			if merr := s.Mark(sctx, id, i+1); merr != nil {
				s.log.Warn("piece sent but not recorded; a redelivery would send it again", "id", id, "piece", i, "err", merr)
			}
		}
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// SendReply sends reply id with Send: its text pieces with piece, then
// its attachments with attach, counted as pieces after the text, so that
// a retry continues after the last piece or attachment sent. Each func
// gets the index among its own kind; start counts both, as Send's does.
func (s *Store) SendReply(ctx context.Context, id string, start int, pieces []string, media []*nanofleetv1.MediaRef,
	piece func(ctx context.Context, i int, text string) error,
	attach func(ctx context.Context, i int, m *nanofleetv1.MediaRef) error) error {
	return s.Send(ctx, id, start, len(pieces)+len(media), func(ctx context.Context, i int) error {
		if i < len(pieces) {
			return piece(ctx, i, pieces[i])
		}
		return attach(ctx, i-len(pieces), media[i-len(pieces)])
	})
}

// PieceKey is an idempotency key for piece i of reply id, for a platform
// that takes one (Discord's nonce, Feishu's uuid): the same for every
// attempt at the piece, in hex, cut by the caller to the platform's
// length.
func PieceKey(id string, i int) string {
	sum := sha256.Sum256([]byte(id + "#" + strconv.Itoa(i)))
	return hex.EncodeToString(sum[:])
}
