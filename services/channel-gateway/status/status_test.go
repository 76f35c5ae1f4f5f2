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
	b := bustest.StartJetStream(t)
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
	board, err := status.Open(ctx, bustest.StartJetStream(t))
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
