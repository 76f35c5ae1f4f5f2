package status_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus/fleetstatustest"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// openBoard opens the status board on a JetStream of its own.
func openBoard(t *testing.T) (*bus.Bus, *status.Board) {
	t.Helper()
	b := bustest.StartJetStream(t, status.Assets)
	board, err := status.Open(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	return b, board
}

// running announces gateways called ids as channel-gateways do, until
// the test ends.
func running(t *testing.T, b *bus.Bus, ids ...string) []fleetstatus.Service {
	t.Helper()
	for _, id := range ids {
		fleetstatustest.Online(t, b, fleetstatus.GatewayService, map[string]string{fleetstatus.IDKey: id})
	}
	svcs, err := fleetstatus.Discover(t.Context(), b.NC, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return svcs
}

// TestChannels: each channel is shown from the records of the gateways
// running now, checked against the leases. Two gateways run, gw-a and
// gw-b; gw-dead wrote records before it died.
func TestChannels(t *testing.T) {
	ctx := t.Context()
	b, board := openBoard(t)
	kv, err := b.KV(ctx, bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	leases := lease.NewTable(kv)
	log := slog.New(slog.DiscardHandler)
	a, gb, dead, quiet := board.Reporter("gw-a"), board.Reporter("gw-b"), board.Reporter("gw-dead"), board.Reporter("gw-quiet")
	down := errors.New("telegram getMe failed, retrying: dial tcp: lookup api.telegram.org: no such host")

	// telegram: held by gw-a; gw-b's start is retried.
	if _, err := leases.Acquire(ctx, "telegram-poller-1", "gw-a"); err != nil {
		t.Fatal(err)
	}
	a.Holding(ctx, log, "telegram", "telegram-poller-1", "@bot")
	gb.Retrying(ctx, log, "telegram", down)
	// slack: every gateway connects; gw-b's auth.test is retried.
	a.Serving(ctx, log, "slack", "@slackbot")
	gb.Retrying(ctx, log, "slack", errors.New("slack auth.test failed, retrying: timeout"))
	// web: both serve it, each at its own address; gw-a reported last.
	gb.Serving(ctx, log, "web", "http://y")
	a.Serving(ctx, log, "web", "http://x")
	// discord: held by gw-dead, which died; its lease expired.
	dead.Holding(ctx, log, "discord", "discord-conn-1", "bot#1")
	// feishu: gw-a's connection was taken over by gw-c, not reported yet.
	if _, err := leases.Acquire(ctx, "feishu-conn-1", "gw-c"); err != nil {
		t.Fatal(err)
	}
	a.Holding(ctx, log, "feishu", "feishu-conn-1", "")
	// dingtalk: failed on both, gw-b with another reason.
	a.Holding(ctx, log, "dingtalk", "dingtalk-conn-1", "")(ctx, errors.New("credentials rejected"))
	gb.Failing(ctx, log, "dingtalk", errors.New("credentials rejected"))
	// whatsapp: gw-quiet did not answer discovery, but holds the lease.
	if _, err := leases.Acquire(ctx, "whatsapp-conn-1", "gw-quiet"); err != nil {
		t.Fatal(err)
	}
	quiet.Holding(ctx, log, "whatsapp", "whatsapp-conn-1", "+1555")
	// api: only gw-dead reported it, failing.
	dead.Failing(ctx, log, "api", errors.New("listen: address in use"))

	svcs := running(t, b, "gw-a", "gw-b")
	got, err := board.Channels(ctx, leases, svcs, []string{"telegram", "slack", "web", "discord", "feishu", "dingtalk", "whatsapp", "api", "matrix"})
	if err != nil {
		t.Fatal(err)
	}
	type other struct {
		gateway string
		state   status.State
		reason  string
	}
	tests := []struct {
		state           status.State
		account, holder string
		reason          string
		others          []other
	}{
		{status.Connected, "@bot", "gw-a", "", []other{{"gw-b", status.Failed, down.Error()}}},
		{status.Connected, "@slackbot", "gw-a", "", []other{{"gw-b", status.Failed, "slack auth.test failed, retrying: timeout"}}},
		{status.Connected, "http://x", status.EveryGateway, "", []other{{"gw-b", status.Connected, ""}}},
		{status.NotRunning, "bot#1", "", "its gateway gw-dead no longer runs; it last reported connected", nil},
		{status.Stopped, "", "gw-a", "the connection was taken over by gw-c", nil},
		{status.Failed, "", status.EveryGateway, "credentials rejected", nil},
		{status.Connected, "+1555", "gw-quiet", "", nil},
		{status.NotRunning, "", "", "its gateway gw-dead no longer runs; it last reported failed: listen: address in use", nil},
		{status.NotRunning, "", "", "", nil},
	}
	if len(got) != len(tests) {
		t.Fatalf("Channels = %+v", got)
	}
	for i, tt := range tests {
		c := got[i]
		if c.State != tt.state || c.Account != tt.account || c.Holder != tt.holder || c.Reason != tt.reason {
			t.Errorf("%s = %+v, want %s as %q held by %q: %q", c.Channel, c.Record, tt.state, tt.account, tt.holder, tt.reason)
		}
		if len(c.Others) != len(tt.others) {
			t.Errorf("%s: others = %+v, want %+v", c.Channel, c.Others, tt.others)
			continue
		}
		for j, o := range tt.others {
			if g := c.Others[j]; g.Gateway != o.gateway || g.State != o.state || g.Reason != o.reason {
				t.Errorf("%s: other %d = %+v, want %+v", c.Channel, j, g, o)
			}
		}
	}
	all, err := board.Channels(ctx, leases, svcs, nil)
	if err != nil || len(all) != 8 || all[0].Channel != "api" {
		t.Errorf("every channel with a record = %+v, %v", all, err)
	}

	// gw-a stops: it withdraws its records, and telegram and slack show
	// what gw-b says, failed.
	if err := a.Withdraw(ctx); err != nil {
		t.Fatal(err)
	}
	a.Serving(ctx, log, "slack", "@slackbot") // too late: dropped
	got, err = board.Channels(ctx, leases, running(t, b, "gw-b"), []string{"telegram", "slack"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got {
		if c.State != status.Failed || c.Holder != "gw-b" || len(c.Others) != 0 {
			t.Errorf("%s after gw-a stopped = %+v, want failed on gw-b", c.Channel, c)
		}
	}
}

// TestMerge: the rule that makes one channel of its gateways' records.
func TestMerge(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := func(gw string, s status.State, reason string, ago int) status.Record {
		return status.Record{Channel: "slack", Gateway: gw, Holder: gw, State: s, Reason: reason, Updated: at.Add(-time.Duration(ago) * time.Minute)}
	}
	tests := []struct {
		name           string
		current, gone  []status.Record
		state          status.State
		holder, reason string
		others         []string // gateways
	}{
		{"nothing", nil, nil, status.NotRunning, "", "", nil},
		{"only gone", nil, []status.Record{rec("g1", status.Connected, "", 9), rec("g2", status.Failed, "x", 1)},
			status.NotRunning, "", "its gateway g2 no longer runs; it last reported failed: x", nil},
		{"connected beats failed, newer", []status.Record{rec("g1", status.Failed, "down", 0), rec("g2", status.Connected, "", 5)}, nil,
			status.Connected, "g2", "", []string{"g1"}},
		{"gone records do not count", []status.Record{rec("g1", status.Failed, "down", 0)}, []status.Record{rec("g2", status.Connected, "", 0)},
			status.Failed, "g1", "down", nil},
		{"two of three connected", []status.Record{rec("g1", status.Connected, "", 0), rec("g2", status.Connected, "", 0), rec("g3", status.Failed, "down", 0)}, nil,
			status.Connected, "2 of 3 gateways", "", []string{"g3"}},
		{"failing on every gateway, newest reason first", []status.Record{rec("g1", status.Failed, "old", 3), rec("g2", status.Failed, "new", 1)}, nil,
			status.Failed, status.EveryGateway, "new", []string{"g1"}},
		{"linking beats failed", []status.Record{rec("g1", status.Failed, "down", 0), rec("g2", status.Linking, "", 0)}, nil,
			status.Linking, "g2", "", []string{"g1"}},
		{"a stop without reason is not news", []status.Record{rec("g1", status.Connected, "", 0), rec("g2", status.Stopped, "", 0)}, nil,
			status.Connected, "g1", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := status.Merge("slack", tt.current, tt.gone)
			if c.Channel != "slack" || c.State != tt.state || c.Holder != tt.holder || c.Reason != tt.reason || c.Gateway != "" {
				t.Errorf("Merge = %+v, want %s held by %q: %q", c.Record, tt.state, tt.holder, tt.reason)
			}
			var others []string
			for _, o := range c.Others {
				others = append(others, o.Gateway)
			}
			if len(others) != len(tt.others) || len(others) > 0 && others[0] != tt.others[0] {
				t.Errorf("others = %q, want %q", others, tt.others)
			}
		})
	}
}

// TestReporter: a gateway's records are its own; Refresh writes them
// again, Started clears a failure, Withdraw deletes them all.
func TestReporter(t *testing.T) {
	ctx := t.Context()
	_, board := openBoard(t)
	log := slog.New(slog.DiscardHandler)
	a, other := board.Reporter("gw-a"), board.Reporter("host.example/12") // not a key token: escaped
	a.Serving(ctx, log, "web", "http://x")
	a.Retrying(ctx, log, "slack", errors.New("down"))
	other.Serving(ctx, log, "web", "http://y")
	count := func(channel string) int {
		t.Helper()
		recs, err := board.Records(ctx, channel)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	if n, m := count("web"), count("slack"); n != 2 || m != 1 {
		t.Fatalf("records: %d of web, %d of slack; want 2 and 1", n, m)
	}
	before, err := board.Records(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	a.Refresh(ctx, log)
	after, err := board.Records(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 2 || !after[0].Updated.Equal(before[0].Updated) || !after[1].Updated.Equal(before[1].Updated) {
		t.Errorf("refreshed records %+v, were %+v: the time of the report is kept", after, before)
	}
	a.Started(ctx, log, "slack")
	if n := count("slack"); n != 0 {
		t.Errorf("%d slack records once started, want none", n)
	}
	if err := a.Withdraw(ctx); err != nil {
		t.Fatal(err)
	}
	a.Serving(ctx, log, "api", "http://x/v1")
	recs, err := board.Records(ctx, "")
	if err != nil || len(recs) != 1 || recs[0].Gateway != "host.example/12" {
		t.Errorf("records after gw-a withdrew = %+v, %v; want the other gateway's", recs, err)
	}
	var none *status.Reporter // an adapter built without one
	none.Serving(ctx, log, "web", "http://z")
	if err := none.Withdraw(ctx); err != nil || none.Gateway() != "" {
		t.Errorf("nil reporter: %v, %q", err, none.Gateway())
	}
}

// TestWatch: a watch sends the stored records of running gateways, then
// every record written.
func TestWatch(t *testing.T) {
	ctx := t.Context()
	_, board := openBoard(t)
	if err := board.Reporter("gw-dead").Update(ctx, "whatsapp", func(r *status.Record) { r.State, r.Account = status.Connected, "+1000" }); err != nil {
		t.Fatal(err)
	}
	gw := board.Reporter("gw-1")
	if err := gw.Update(ctx, "whatsapp", func(r *status.Record) { r.State, r.QR = status.Linking, "qr-1" }); err != nil {
		t.Fatal(err)
	}
	updates, err := board.Watch(ctx, "whatsapp", map[string]bool{"gw-1": true})
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
	if r := next(); r.State != status.Linking || r.QR != "qr-1" || r.Channel != "whatsapp" || r.Gateway != "gw-1" || r.Updated.IsZero() {
		t.Errorf("current record = %+v", r)
	}
	if err := gw.Update(ctx, "whatsapp", func(r *status.Record) { r.State, r.QR, r.Account = status.Connected, "", "+1555" }); err != nil {
		t.Fatal(err)
	}
	if r := next(); r.State != status.Connected || r.QR != "" || r.Account != "+1555" {
		t.Errorf("update = %+v", r)
	}
}
