package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/subject"
)

// Reporter writes one gateway's records, each channel's under the key
// <channel>.<gateway>, so that gateways never overwrite each other's. It
// is the only writer of its keys and keeps what it wrote, which
// [Reporter.Refresh] writes again and [Reporter.Withdraw] deletes. It is
// safe for concurrent use. A nil *Reporter reports nothing (an adapter
// built without one, in a test).
type Reporter struct {
	kv      jetstream.KeyValue
	gateway string

	mu        sync.Mutex // serialises the writes, so the last one stored is the last one kept
	records   map[string]Record
	withdrawn bool
}

// Reporter returns the reporter of the gateway called id: the id it
// announces in discovery (fleetstatus.Register), which readers check
// its records against.
func (b *Board) Reporter(id string) *Reporter {
	return &Reporter{kv: b.kv, gateway: id, records: map[string]Record{}}
}

// Gateway is the id the reporter writes as; empty for a nil Reporter.
func (r *Reporter) Gateway() string {
	if r == nil {
		return ""
	}
	return r.gateway
}

// key is the record's key: the channel, then the gateway id as one key
// token (a host name may hold dots).
func key(channel, gateway string) string {
	return channel + "." + subject.Token(gateway)
}

// Update changes this gateway's record of channel with f (starting from
// the last one it wrote, or an empty one) and stores it. After
// [Reporter.Withdraw] it stores nothing.
func (r *Reporter) Update(ctx context.Context, channel string, f func(*Record)) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.withdrawn {
		return nil
	}
	rec, ok := r.records[channel]
	if !ok {
		rec = Record{Channel: channel}
	}
	f(&rec)
	rec.Channel, rec.Gateway, rec.Updated = channel, r.gateway, time.Now().UTC()
	if err := r.put(ctx, rec); err != nil {
		return err
	}
	r.records[channel] = rec
	return nil
}

func (r *Reporter) put(ctx context.Context, rec Record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("status: encode %s: %w", rec.Channel, err)
	}
	ctx, cancel := context.WithTimeout(ctx, bus.CallTimeout)
	defer cancel()
	if _, err := r.kv.Put(ctx, key(rec.Channel, r.gateway), data); err != nil {
		return fmt.Errorf("status: store %s of gateway %s: %w", rec.Channel, r.gateway, err)
	}
	return nil
}

func (r *Reporter) delete(ctx context.Context, channel string) error {
	ctx, cancel := context.WithTimeout(ctx, bus.CallTimeout)
	defer cancel()
	if err := r.kv.Delete(ctx, key(channel, r.gateway)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("status: delete %s of gateway %s: %w", channel, r.gateway, err)
	}
	return nil
}

// Refresh writes this gateway's records again as they are, so that they
// outlive the bucket's [TTL] while the gateway runs; a running gateway
// calls it every [RefreshEvery]. Failures are logged.
func (r *Reporter) Refresh(ctx context.Context, log *slog.Logger) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.withdrawn {
		return
	}
	for _, rec := range r.records {
		if err := r.put(ctx, rec); err != nil {
			log.Warn("refresh channel status", "channel", rec.Channel, "err", err)
		}
	}
}

// Withdraw deletes every record this gateway wrote, when it stops: a
// gateway that no longer runs has nothing to report. Later reports are
// dropped. It returns the first failure; the records it could not delete
// are hidden from readers all the same (the gateway no longer answers
// discovery) and expire with the bucket's [TTL].
func (r *Reporter) Withdraw(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.withdrawn = true
	var first error
	for channel := range r.records {
		if err := r.delete(ctx, channel); err != nil && first == nil {
			first = err
		}
		delete(r.records, channel)
	}
	return first
}

// Holding reports that this gateway runs channel's connection under the
// lease key (its lease owner being the gateway's id), and returns the
// function to call with the connection's error when it ends (before the
// lease is released). Failures to report are logged only.
//
// account, when not empty, replaces the account shown.
func (r *Reporter) Holding(ctx context.Context, log *slog.Logger, channel, key, account string) (ended func(ctx context.Context, err error)) {
	r.report(ctx, log, channel, func(rec *Record) {
		rec.State, rec.Reason, rec.Holder, rec.Lease = Connected, "", r.Gateway(), key
		if account != "" {
			rec.Account = account
		}
	})
	return func(ctx context.Context, err error) {
		r.report(ctx, log, channel, func(rec *Record) {
			rec.State, rec.Reason, rec.QR = Stopped, "", ""
			if err != nil {
				rec.State, rec.Reason = Failed, err.Error()
			}
		})
	}
}

// Serving reports that this gateway serves channel, which every gateway
// serves at once (no lease).
func (r *Reporter) Serving(ctx context.Context, log *slog.Logger, channel, account string) {
	r.report(ctx, log, channel, func(rec *Record) {
		rec.State, rec.Reason, rec.Account, rec.Holder, rec.Lease, rec.QR = Connected, "", account, r.Gateway(), "", ""
	})
}

// Failing reports that channel failed to run on this gateway.
func (r *Reporter) Failing(ctx context.Context, log *slog.Logger, channel string, err error) {
	r.report(ctx, log, channel, func(rec *Record) { rec.State, rec.Reason, rec.QR = Failed, err.Error(), "" })
}

// Retrying reports that starting channel on this gateway failed with err
// and is being tried again (a platform that cannot be reached, a name
// that does not resolve): this gateway's record says failed with err
// until it starts. Another gateway's record, which may say connected,
// is not touched.
func (r *Reporter) Retrying(ctx context.Context, log *slog.Logger, channel string, err error) {
	r.report(ctx, log, channel, func(rec *Record) {
		rec.State, rec.Reason, rec.Holder, rec.Lease, rec.QR = Failed, err.Error(), r.Gateway(), "", ""
	})
}

// Started reports that the start-up call [Reporter.Retrying] reported on
// answered at last: this gateway's record of channel is deleted, its
// failure being over, until what runs next reports (a connection taken
// under its lease, a channel served). Failures are logged only.
func (r *Reporter) Started(ctx context.Context, log *slog.Logger, channel string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.records[channel]; !ok || r.withdrawn {
		return
	}
	if err := r.delete(ctx, channel); err != nil {
		log.Warn("clear channel status", "channel", channel, "err", err)
		return
	}
	delete(r.records, channel)
}

func (r *Reporter) report(ctx context.Context, log *slog.Logger, channel string, f func(*Record)) {
	if err := r.Update(ctx, channel, f); err != nil {
		log.Warn("report channel status", "channel", channel, "err", err)
	}
}
