package status_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

func TestChannels(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t, status.Assets)
	board, err := status.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := b.KV(ctx, bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	leases := lease.NewTable(kv)
	log := slog.New(slog.DiscardHandler)

	// telegram: held, its lease alive.
	if _, err := leases.Acquire(ctx, "telegram-poller-1", "gw-a"); err != nil {
		t.Fatal(err)
	}
	board.Holding(ctx, log, "telegram", "gw-a", "telegram-poller-1", "@bot")
	// discord: its holder died; the lease is gone.
	board.Holding(ctx, log, "discord", "gw-dead", "discord-conn-1", "")
	// feishu: taken over by gw-b, which has not reported yet.
	if _, err := leases.Acquire(ctx, "feishu-conn-1", "gw-b"); err != nil {
		t.Fatal(err)
	}
	board.Holding(ctx, log, "feishu", "gw-a", "feishu-conn-1", "")
	// dingtalk: failed and released.
	ended := board.Holding(ctx, log, "dingtalk", "gw-a", "dingtalk-conn-1", "")
	ended(ctx, errors.New("credentials rejected"))
	// slack and web: every gateway.
	board.Serving(ctx, log, "slack", "@slackbot")
	board.Serving(ctx, log, "web", "http://x")
	board.Failing(ctx, log, "web", errors.New("listen: address in use"))

	got, err := board.Channels(ctx, leases, []string{"telegram", "discord", "feishu", "dingtalk", "slack", "web", "whatsapp"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		state           status.State
		account, holder string
		reason          string
	}{
		{status.Connected, "@bot", "gw-a", ""},
		{status.Failed, "", "gw-dead", "its gateway gw-dead stopped without a word; no gateway holds the connection"},
		{status.Connected, "", "gw-b", ""},
		{status.Failed, "", "gw-a", "credentials rejected"},
		{status.Connected, "@slackbot", status.EveryGateway, ""},
		{status.Failed, "http://x", status.EveryGateway, "listen: address in use"},
		{status.NotRunning, "", "", ""},
	}
	if len(got) != len(tests) {
		t.Fatalf("Channels = %+v", got)
	}
	for i, tt := range tests {
		r := got[i]
		if r.State != tt.state || r.Account != tt.account || r.Holder != tt.holder || r.Reason != tt.reason {
			t.Errorf("%s = %+v, want %+v", r.Channel, r, tt)
		}
	}
	all, err := board.Channels(ctx, leases, nil)
	if err != nil || len(all) != 6 || all[0].Channel != "dingtalk" {
		t.Errorf("every stored record = %+v, %v", all, err)
	}
}

func TestWatch(t *testing.T) {
	ctx := t.Context()
	board, err := status.Open(ctx, bustest.StartJetStream(t, status.Assets))
	if err != nil {
		t.Fatal(err)
	}
	if err := board.Update(ctx, "whatsapp", func(r *status.Record) { r.State, r.QR = status.Linking, "qr-1" }); err != nil {
		t.Fatal(err)
	}
	updates, err := board.Watch(ctx, "whatsapp")
	if err != nil {
		t.Fatal(err)
	}
	next := func() status.Record {
		t.Helper()
		select {
		case r := <-updates:
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("no update")
			return status.Record{}
		}
	}
	if r := next(); r.State != status.Linking || r.QR != "qr-1" || r.Channel != "whatsapp" || r.Updated.IsZero() {
		t.Errorf("current record = %+v", r)
	}
	if err := board.Update(ctx, "whatsapp", func(r *status.Record) { r.State, r.QR, r.Account = status.Connected, "", "+1555" }); err != nil {
		t.Fatal(err)
	}
	if r := next(); r.State != status.Connected || r.QR != "" || r.Account != "+1555" {
		t.Errorf("update = %+v", r)
	}
}

// TestRetrying: a channel whose start-up is retried shows as failed with
// the error (it showed as not running with no reason), unless its record
// is a connection held under a lease, which its holder runs.
func TestRetrying(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t, status.Assets)
	board, err := status.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	board.Holding(ctx, log, "discord", "gw-a", "discord-conn-1", "bot#1")
	board.Holding(ctx, log, "feishu", "gw-a", "feishu-conn-1", "")(ctx, nil) // stopped
	board.Serving(ctx, log, "slack", "@bot")
	down := errors.New("telegram getMe failed, retrying: dial tcp: lookup api.telegram.org: no such host")
	tests := []struct {
		channel, state, reason, holder string
	}{
		{"telegram", "failed", down.Error(), ""}, // no record yet
		{"feishu", "failed", down.Error(), ""},   // its last holder stopped
		{"slack", "failed", down.Error(), ""},    // every gateway's: this one fails
		{"discord", "connected", "", "gw-a"},     // held under a lease
	}
	for _, tt := range tests {
		board.Retrying(ctx, log, tt.channel, down)
		r, err := board.Get(ctx, tt.channel)
		if err != nil || r == nil {
			t.Fatalf("%s: %v, %v", tt.channel, r, err)
		}
		if string(r.State) != tt.state || r.Reason != tt.reason || r.Holder != tt.holder {
			t.Errorf("%s = %+v, want %s %q held by %q", tt.channel, r, tt.state, tt.reason, tt.holder)
		}
	}
}
