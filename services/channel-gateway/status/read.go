package status

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/lease"
)

// Channel is a channel as readers show it: the state merged from the
// records of the gateways running now ([Board.Channels]).
type Channel struct {
	// Record is what is shown: the state, the account, the holder
	// (a gateway, [EveryGateway] or "2 of 3 gateways"), the reason.
	Record
	// Others are the records of running gateways that say something
	// else (a gateway whose start is retried beside the one connected),
	// newest first.
	Others []Record `json:"others,omitempty"`
}

// Records returns every gateway's record of channel (every record when
// channel is empty), as stored, newest first; records of gateways no
// longer running included. One watch of the stored values reads them
// all, not a listing of the keys and a read of each.
func (b *Board) Records(ctx context.Context, channel string) ([]Record, error) {
	filter := ">"
	if channel != "" {
		filter = channel + ".>"
	}
	ctx, cancel := context.WithTimeout(ctx, bus.CallTimeout)
	defer cancel()
	w, err := b.kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("status: read: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var out []Record
	for {
		select {
		case e := <-w.Updates():
			if e == nil { // the stored values are all in
				sortNewest(out)
				return out, nil
			}
			if !strings.Contains(e.Key(), ".") {
				continue // a record of a gateway from before records were kept per gateway
			}
			r, err := decode(e.Value())
			if err != nil {
				return nil, fmt.Errorf("status: %s: %w", e.Key(), err)
			}
			out = append(out, *r)
		case <-ctx.Done():
			return nil, fmt.Errorf("status: read: %w", ctx.Err())
		}
	}
}

// Linking returns the newest record of channel waiting for its QR code
// to be scanned, nil when there is none.
func (b *Board) Linking(ctx context.Context, channel string) (*Record, error) {
	recs, err := b.Records(ctx, channel)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if r.State == Linking && r.QR != "" {
			return &r, nil
		}
	}
	return nil, nil
}

func sortNewest(rs []Record) {
	slices.SortStableFunc(rs, func(a, b Record) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		return strings.Compare(a.Gateway, b.Gateway)
	})
}

func decode(data []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return &r, nil
}

// Running is the set of gateway ids among svcs (from fleetstatus.Discover
// or Get): the gateways running now.
func Running(svcs []fleetstatus.Service) map[string]bool {
	out := map[string]bool{}
	for _, s := range svcs {
		if s.Name == fleetstatus.GatewayService && s.Metadata[fleetstatus.IDKey] != "" {
			out[s.Metadata[fleetstatus.IDKey]] = true
		}
	}
	return out
}

// Watch sends every gateway's record of channel on every change until
// ctx ends: first the stored ones of the gateways in running (see
// [Running]), then every record written from then on.
func (b *Board) Watch(ctx context.Context, channel string, running map[string]bool) (<-chan Record, error) {
	w, err := b.kv.Watch(ctx, channel+".>")
	if err != nil {
		return nil, fmt.Errorf("status: watch %s: %w", channel, err)
	}
	out := make(chan Record)
	go func() {
		defer close(out)
		defer func() { _ = w.Stop() }()
		current := true // until the nil entry that ends the stored ones
		for e := range w.Updates() {
			if e == nil {
				current = false
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				continue
			}
			r, err := decode(e.Value())
			if err != nil || current && !running[r.Gateway] {
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

// Channels returns each configured channel as readers show it, in the
// order given (nil: every channel with a record, by name). gateways are
// the services discovery found (fleetstatus.Discover or Get).
//
// A record counts while its gateway runs: it answers discovery, or the
// record is a connection whose lease the gateway holds. A running
// gateway's connection whose lease it no longer holds counts as stopped.
// Of the records that count, the channel shows the first state any has
// in the order connected, linking, failed, stopped: connected on one
// gateway is connected, held by it; failed only when failing on every
// gateway that reported. The holder is the one gateway in that state,
// or [EveryGateway] when all are, or "k of n gateways". The records
// saying something else, another account included (each gateway's own
// web address), are [Channel.Others]. A channel no running
// gateway reported on is [NotRunning], with the last report of a gateway
// that is gone as the reason when there is one.
func (b *Board) Channels(ctx context.Context, leases *lease.Table, gateways []fleetstatus.Service, configured []string) ([]Channel, error) {
	all, err := b.Records(ctx, "")
	if err != nil {
		return nil, err
	}
	byChannel := map[string][]Record{}
	for _, r := range all {
		byChannel[r.Channel] = append(byChannel[r.Channel], r)
	}
	if configured == nil {
		for name := range byChannel {
			configured = append(configured, name)
		}
		slices.Sort(configured)
	}
	running := Running(gateways)
	holders := map[string]string{} // lease key -> holder, asked once
	holder := func(key string) (string, error) {
		if h, ok := holders[key]; ok {
			return h, nil
		}
		h, err := leases.Holder(ctx, key)
		if err != nil {
			return "", fmt.Errorf("status: lease %s: %w", key, err)
		}
		holders[key] = h
		return h, nil
	}
	out := make([]Channel, 0, len(configured))
	for _, name := range configured {
		var current, gone []Record
		for _, r := range byChannel[name] {
			alive := running[r.Gateway]
			if r.Lease != "" && (r.State == Connected || r.State == Linking) {
				h, err := holder(r.Lease)
				if err != nil {
					return nil, err
				}
				switch {
				case h == r.Holder:
					alive = true // its lease proves it runs, whatever discovery missed
				case !alive: // a gone gateway's last word, kept as it was
				case h == "":
					r.State, r.Reason, r.QR = Stopped, "its connection lease expired", ""
				default:
					r.State, r.Reason, r.QR = Stopped, "the connection was taken over by "+h, ""
				}
			}
			if alive {
				current = append(current, r)
			} else {
				gone = append(gone, r)
			}
		}
		out = append(out, Merge(name, current, gone))
	}
	return out, nil
}

// Merge is the channel shown for the records of running gateways
// (current) and of gateways that are gone, by the rule of
// [Board.Channels].
func Merge(name string, current, gone []Record) Channel {
	current, gone = slices.Clone(current), slices.Clone(gone)
	sortNewest(current)
	sortNewest(gone)
	if len(current) == 0 {
		c := Channel{Record: Record{Channel: name, State: NotRunning}}
		if len(gone) > 0 {
			g := gone[0]
			c.Reason = fmt.Sprintf("its gateway %s no longer runs; it last reported %s", g.Gateway, g.State)
			if g.Reason != "" {
				c.Reason += ": " + g.Reason
			}
			c.Account, c.Updated = g.Account, g.Updated
		}
		return c
	}
	head := slices.MinFunc(current, func(a, b Record) int { return cmp.Compare(stateRank(a.State), stateRank(b.State)) })
	in := 0 // records in the shown state
	for _, r := range current {
		if r.State == head.State {
			in++
		}
	}
	c := Channel{Record: head}
	c.Channel, c.Gateway = name, ""
	switch {
	case in == 1:
		c.Holder = cmp.Or(head.Holder, head.Gateway)
	case in == len(current):
		c.Holder = EveryGateway
	default:
		c.Holder = fmt.Sprintf("%d of %d gateways", in, len(current))
	}
	if head.State != Linking {
		c.QR = ""
	}
	for _, r := range current {
		switch {
		case r.Gateway == head.Gateway,
			r.State == head.State && r.Reason == head.Reason && r.Account == head.Account,
			r.State == Stopped && r.Reason == "":
			continue
		}
		r.QR = ""
		c.Others = append(c.Others, r)
	}
	return c
}

// stateRank orders the states a merged channel shows: the lowest wins.
func stateRank(s State) int {
	switch s {
	case Connected:
		return 0
	case Linking:
		return 1
	case Failed:
		return 2
	case Stopped:
		return 3
	}
	return 4
}
