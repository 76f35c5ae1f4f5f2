// Package status keeps one small record per channel in a KV bucket: its
// state, the account it runs as, and which gateway runs it, so that
// `nanofleet channels status` and the dashboard can show every channel of
// the fleet without asking each gateway. Records are written by the code
// that runs connections (internal/hold for the platform adapters, the
// channel builder for the web chat and the API); an adapter adds what
// only it knows (the WhatsApp link's QR code and account).
//
// A record is advisory: a gateway that dies leaves its last record
// behind until another takes the connection over, so readers compare the
// holder with the connection lease (Record.Lease in the leases bucket).
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/pkg/subject"
)

// Bucket is the short name of the status bucket.
const Bucket = "channel-status"

// State is what a channel is doing.
type State string

// States.
const (
	// Connected: the holder runs the channel's connection.
	Connected State = "connected"
	// Linking: the account must be linked (WhatsApp's QR code).
	Linking State = "linking"
	// Failed: the last connection attempt failed; Reason says why.
	Failed State = "failed"
	// Stopped: the last holder stopped and no gateway took over yet.
	Stopped State = "stopped"
)

// Record is one channel's status.
type Record struct {
	Channel string `json:"channel"`
	State   State  `json:"state"`
	Reason  string `json:"reason,omitempty"`
	// Account the channel runs as (a phone number, a bot name), when
	// the adapter reports it.
	Account string `json:"account,omitempty"`
	// Holder is the gateway running the connection (host/pid/random).
	Holder string `json:"holder,omitempty"`
	// Lease is the connection lease's key in the leases bucket, empty
	// for channels every gateway serves (web, api).
	Lease string `json:"lease,omitempty"`
	// QR is the code to scan while linking.
	QR      string    `json:"qr,omitempty"`
	Updated time.Time `json:"updated"`
}

// Board reads and writes the records.
type Board struct{ kv jetstream.KeyValue }

// Assets declares the status bucket for [bus.Provision].
func Assets(sp subject.Space, _ bus.Layout) bus.Assets {
	return bus.Assets{Buckets: []jetstream.KeyValueConfig{{
		Bucket: sp.Bucket(Bucket), Description: "channel states for nanofleet channels status", History: 1,
	}}}
}

// Open opens the status bucket; [Assets] must have been provisioned (a
// gateway does it). It never creates the bucket: the CLI opens it too,
// and a client does not change the fleet's layout.
func Open(ctx context.Context, b *bus.Bus) (*Board, error) {
	kv, err := b.KV(ctx, Bucket)
	if err != nil {
		return nil, fmt.Errorf("status: %w (has a channel-gateway started?)", err)
	}
	return &Board{kv: kv}, nil
}

// Update changes channel's record with f (starting from the stored one,
// or an empty one) and stores it.
func (b *Board) Update(ctx context.Context, channel string, f func(*Record)) error {
	r, err := b.Get(ctx, channel)
	if err != nil {
		return err
	}
	if r == nil {
		r = &Record{Channel: channel}
	}
	f(r)
	r.Channel, r.Updated = channel, time.Now().UTC()
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("status: encode %s: %w", channel, err)
	}
	if _, err := b.kv.Put(ctx, channel, data); err != nil {
		return fmt.Errorf("status: store %s: %w", channel, err)
	}
	return nil
}

// Get returns channel's record, nil when there is none.
func (b *Board) Get(ctx context.Context, channel string) (*Record, error) {
	e, err := b.kv.Get(ctx, channel)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("status: read %s: %w", channel, err)
	}
	return decode(e.Value())
}

func decode(data []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("status: decode: %w", err)
	}
	return &r, nil
}

// List returns every record, by channel name.
func (b *Board) List(ctx context.Context) ([]Record, error) {
	l, err := b.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("status: list: %w", err)
	}
	defer l.Stop()
	var out []Record
	for k := range l.Keys() {
		r, err := b.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, *r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Channel < out[j].Channel })
	return out, nil
}

// Watch sends channel's record on every change (the current one first)
// until ctx ends.
func (b *Board) Watch(ctx context.Context, channel string) (<-chan Record, error) {
	w, err := b.kv.Watch(ctx, channel)
	if err != nil {
		return nil, fmt.Errorf("status: watch %s: %w", channel, err)
	}
	out := make(chan Record)
	go func() {
		defer close(out)
		defer w.Stop()
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			r, err := decode(e.Value())
			if err != nil {
				continue
			}
			select {
			case out <- *r:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// NotRunning is the state shown for a configured channel no gateway has
// reported on.
const NotRunning State = "not running"

// Channels returns a record for each configured channel, in the order
// given (nil: every stored record): the stored one, with its holder
// checked against the connection lease (a holder that died without
// reporting shows as failed once its lease expired), or a [NotRunning]
// one.
func (b *Board) Channels(ctx context.Context, leases *lease.Table, configured []string) ([]Record, error) {
	if configured == nil {
		all, err := b.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range all {
			configured = append(configured, r.Channel)
		}
	}
	out := make([]Record, 0, len(configured))
	for _, name := range configured {
		r, err := b.Get(ctx, name)
		if err != nil {
			return nil, err
		}
		if r == nil {
			out = append(out, Record{Channel: name, State: NotRunning})
			continue
		}
		if r.Lease != "" && (r.State == Connected || r.State == Linking) {
			holder, err := leases.Holder(ctx, r.Lease)
			if err != nil {
				return nil, err
			}
			switch {
			case holder == "":
				r.State, r.Reason, r.QR = Failed, "its gateway "+r.Holder+" stopped without a word; no gateway holds the connection", ""
			case holder != r.Holder:
				r.Holder = holder // taken over, its report not yet written
			}
		}
		out = append(out, *r)
	}
	return out, nil
}

// Holding reports that owner runs channel's connection under the lease
// key, and returns the function to call with the connection's error when
// it ends (before the lease is released, so that the report cannot
// overwrite the next holder's). Failures to report are logged only.
//
// account, when not empty, replaces the account shown.
func (b *Board) Holding(ctx context.Context, log *slog.Logger, channel, owner, key, account string) (ended func(ctx context.Context, err error)) {
	b.report(ctx, log, channel, func(r *Record) {
		r.State, r.Reason, r.Holder, r.Lease = Connected, "", owner, key
		if account != "" {
			r.Account = account
		}
	})
	return func(ctx context.Context, err error) {
		b.report(ctx, log, channel, func(r *Record) {
			r.State, r.Reason, r.QR = Stopped, "", ""
			if err != nil {
				r.State, r.Reason = Failed, err.Error()
			}
		})
	}
}

// Serving reports a channel every gateway serves at once (no lease).
func (b *Board) Serving(ctx context.Context, log *slog.Logger, channel, account string) {
	b.report(ctx, log, channel, func(r *Record) {
		r.State, r.Reason, r.Account, r.Holder, r.Lease, r.QR = Connected, "", account, EveryGateway, "", ""
	})
}

// Failing reports that channel failed to run on this gateway.
func (b *Board) Failing(ctx context.Context, log *slog.Logger, channel string, err error) {
	b.report(ctx, log, channel, func(r *Record) { r.State, r.Reason, r.QR = Failed, err.Error(), "" })
}

// Retrying reports that starting channel on this gateway failed with err
// and is being tried again (a platform that cannot be reached, a name
// that does not resolve): the channel shows as failed with err until it
// starts, instead of not running without a reason. A connection held
// under a lease keeps its record: its holder, maybe another gateway,
// runs it, and readers check the lease.
func (b *Board) Retrying(ctx context.Context, log *slog.Logger, channel string, err error) {
	if r, gerr := b.Get(ctx, channel); gerr == nil && r != nil && r.Lease != "" && (r.State == Connected || r.State == Linking) {
		return
	}
	b.report(ctx, log, channel, func(r *Record) {
		r.State, r.Reason, r.Holder, r.Lease, r.QR = Failed, err.Error(), "", "", ""
	})
}

// EveryGateway is the holder of a channel every gateway serves.
const EveryGateway = "every gateway"

func (b *Board) report(ctx context.Context, log *slog.Logger, channel string, f func(*Record)) {
	if err := b.Update(ctx, channel, f); err != nil {
		log.Warn("report channel status", "channel", channel, "err", err)
	}
}
