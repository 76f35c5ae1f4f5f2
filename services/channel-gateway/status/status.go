// Package status keeps small records of what each gateway does with each
// channel in a KV bucket: its state, the account it runs as, and which
// gateway runs it, so that `nanofleet channels status` and the dashboard
// can show every channel of the fleet without asking each gateway.
//
// Every gateway writes its own record of a channel (key
// <channel>.<gateway>), through its [Reporter]: the code that runs
// connections (internal/hold for the platform adapters, internal/retry for
// their start-up calls, the channel builder for the web chat and the API)
// reports, and an adapter adds what only it knows (the WhatsApp link's QR
// code and account). So a gateway whose start-up is retried never
// overwrites what another gateway, which runs the channel, reported.
//
// Readers merge a channel's records ([Board.Channels]): only the records
// of gateways running now count (those that answer discovery, or whose
// connection lease proves them alive), and a channel connected on one of
// them is connected, with the other gateways' failures beside it. A
// gateway deletes its records when it stops ([Reporter.Withdraw]); those
// of one that died expire with the bucket's TTL, which the running
// gateways outlive by rewriting theirs ([Reporter.Refresh]).
package status

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/subject"
)

// Bucket is the short name of the status bucket.
const Bucket = "channel-status"

// TTL is how long a record lives unless its gateway rewrites it: the
// records of a gateway that died without withdrawing them go within it.
const TTL = 24 * time.Hour

// RefreshEvery is how often a running gateway rewrites its records
// ([Reporter.Refresh]), well within [TTL].
const RefreshEvery = TTL / 4

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
	// NotRunning is shown for a configured channel no running gateway
	// has reported on; readers make it, gateways never write it.
	NotRunning State = "not running"
)

// EveryGateway is the holder shown for a channel every running gateway
// serves (Slack, Telegram webhooks, the web chat and the API) when
// there are several.
const EveryGateway = "every gateway"

// Record is one gateway's report on one channel.
type Record struct {
	Channel string `json:"channel"`
	State   State  `json:"state"`
	Reason  string `json:"reason,omitempty"`
	// Account the channel runs as (a phone number, a bot name), when
	// the adapter reports it.
	Account string `json:"account,omitempty"`
	// Holder is the gateway running the connection: in a gateway's own
	// record its id, in a merged one what [Board.Channels] shows (a
	// gateway, [EveryGateway], "2 of 3 gateways").
	Holder string `json:"holder,omitempty"`
	// Gateway is the id of the gateway that wrote the record, the one it
	// announces in discovery; empty in a merged record.
	Gateway string `json:"gateway,omitempty"`
	// Lease is the connection lease's key in the leases bucket, empty
	// for channels every gateway serves (web, api).
	Lease string `json:"lease,omitempty"`
	// QR is the code to scan while linking.
	QR      string    `json:"qr,omitempty"`
	Updated time.Time `json:"updated"`
}

// Board reads the records; [Board.Reporter] writes one gateway's.
type Board struct{ kv jetstream.KeyValue }

// Assets declares the status bucket for [bus.Provision].
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.KeyValue(jetstream.KeyValueConfig{
		Bucket: Bucket, Description: "channel states per gateway for nanofleet channels status", History: 1, TTL: TTL,
	})(sp, l)
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
