package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
)

func TestProvisionIsIdempotent(t *testing.T) {
	srv := bustest.StartServer(t)
	b := srv.Connect(t, "fleet-a")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, b, bustest.TestLayout()); err != nil {
		t.Fatalf("second provision: %v", err)
	}
	info, err := b.JS.Stream(ctx, "FLEET_A_IN")
	if err != nil {
		t.Fatalf("inbound stream: %v", err)
	}
	if got := info.CachedInfo().Config.Retention; got != jetstream.WorkQueuePolicy {
		t.Errorf("inbound retention = %v, want work queue", got)
	}

	// A changed mutable setting is applied in place.
	l := bustest.TestLayout()
	l.DuplicateWindow = time.Minute
	if err := bus.Provision(ctx, b, l); err != nil {
		t.Fatalf("provision with changed duplicate window: %v", err)
	}
	info, _ = b.JS.Stream(ctx, "FLEET_A_IN")
	if got := info.CachedInfo().Config.Duplicates; got != time.Minute {
		t.Errorf("duplicate window = %s, want 1m", got)
	}

	// A change JetStream cannot apply fails naming the stream.
	if _, err := b.JS.UpdateStream(ctx, jetstream.StreamConfig{Name: "FLEET_A_OUT", Subjects: []string{"fleet-a.out.>"}, Storage: jetstream.MemoryStorage}); err == nil {
		t.Fatal("changing storage type succeeded; want an error")
	}
}

func TestProvisionRejectsBadLayout(t *testing.T) {
	b := bustest.StartJetStream(t)
	l := bustest.TestLayout()
	l.Replicas = 0
	err := bus.Provision(t.Context(), b, l)
	if err == nil || !strings.Contains(err.Error(), "nats.replicas") {
		t.Fatalf("Provision with 0 replicas: %v, want error naming nats.replicas", err)
	}
}

// TestLayoutValidate: a bad layout fails naming its key; duplicate
// windows shorter than a publish's resends let a late resend be stored
// twice.
func TestLayoutValidate(t *testing.T) {
	for _, tt := range []struct {
		name    string
		edit    func(*bus.Layout)
		wantKey string // the keys named, space-separated; "": valid
	}{
		{"default", func(*bus.Layout) {}, ""},
		{"windows at the floor", func(l *bus.Layout) { l.DuplicateWindow, l.ReplayWindow = bus.MinWindow, bus.MinWindow }, ""},
		{"no replicas", func(l *bus.Layout) { l.Replicas = 0 }, "nats.replicas"},
		{"duplicate window within the resend span", func(l *bus.Layout) { l.DuplicateWindow = bus.ResendSpan - time.Second }, "nats.duplicateWindowSeconds"},
		{"duplicate window below the floor", func(l *bus.Layout) { l.DuplicateWindow = bus.MinWindow - time.Second }, "nats.duplicateWindowSeconds"},
		{"replay window below the floor", func(l *bus.Layout) { l.ReplayWindow = bus.MinWindow - time.Second }, "nats.replayWindowSeconds"},
		{"replay window under two lease TTLs", func(l *bus.Layout) { l.LeaseTTL = 2 * time.Minute }, "nats.replayWindowSeconds"},
		{"lease TTL over an hour", func(l *bus.Layout) { l.LeaseTTL, l.ReplayWindow = 2*time.Hour, 5*time.Hour }, "nats.leaseTtlSeconds"},
		{"duplicate window over a day", func(l *bus.Layout) { l.DuplicateWindow = 25 * time.Hour }, "nats.duplicateWindowSeconds"},
		{"two keys at once, both named", func(l *bus.Layout) { l.Replicas, l.BlobsMaxBytes = 7, -1 }, "nats.replicas nats.blobsMaxMB"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := bus.DefaultLayout()
			tt.edit(&l)
			err := l.Validate()
			switch {
			case tt.wantKey == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.wantKey != "" && !errors.Is(err, config.ErrInvalid):
				t.Errorf("Validate = %v, want config.ErrInvalid", err)
			}
			for _, key := range strings.Fields(tt.wantKey) {
				if !strings.Contains(fmt.Sprint(err), key) {
					t.Errorf("Validate = %v, want it naming %s", err, key)
				}
			}
		})
	}
}

// TestConfigValidate: every invalid key of the nats section is named in
// one error.
func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  bus.Config
		keys []string // named; none: valid
	}{
		{"defaults", bus.Config{}, nil},
		{"prefix", bus.Config{Prefix: "no spaces"}, []string{"nats.prefix"}},
		{"cert without key", bus.Config{TLS: bus.TLSConfig{CertFile: "c.pem"}}, []string{"nats.tls.keyFile"}},
		{"key without cert", bus.Config{TLS: bus.TLSConfig{KeyFile: "k.pem"}}, []string{"nats.tls.certFile"}},
		{"both at once", bus.Config{Prefix: "a.b", TLS: bus.TLSConfig{KeyFile: "k.pem"}}, []string{"nats.prefix", "nats.tls.certFile"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != (len(tt.keys) == 0) || err != nil && !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("Validate = %v, want config.ErrInvalid naming %v", err, tt.keys)
			}
			for _, key := range tt.keys {
				if !strings.Contains(err.Error(), key) {
					t.Errorf("Validate = %v, want it naming %s", err, key)
				}
			}
		})
	}
}

func TestTwoPrefixesShareAServer(t *testing.T) {
	srv := bustest.StartServer(t)
	a := srv.Connect(t, "alpha")
	bb := srv.Connect(t, "beta")
	ctx := t.Context()
	if _, err := a.JS.Publish(ctx, a.Space.Inbound("cli", "x"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	info, err := bb.JS.Stream(ctx, bb.Space.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("beta inbound has %d messages from alpha", n)
	}
}

func TestDeadLetterKeepsReason(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	err := b.DeadLetter(ctx, "inbound", bus.Letter{Subject: "nanofleet.in.cli.x", Data: []byte{0xff}, StreamSeq: 7, Reason: "decode: bad wire type"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.JS.Stream(ctx, b.Space.DeadLetterStream())
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.GetLastMsgForSubject(ctx, b.Space.DeadLetter("inbound"))
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.Header.Get("Nanofleet-Reason"); got != "decode: bad wire type" {
		t.Errorf("reason header = %q", got)
	}
}

// TestProvisionUpgradesCheckpointBucket: a checkpoint bucket made before
// checkpoint markers expired gets per-message TTLs when the fleet is
// provisioned again, keeping its checkpoints.
func TestProvisionUpgradesCheckpointBucket(t *testing.T) {
	srv := bustest.StartServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: srv.ClientURL(), Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.NC.Close()
	name := b.Space.Bucket(bus.BucketCheckpoints)
	old, err := b.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, Description: "turns in progress", History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Put(ctx, "s", []byte("checkpoint")); err != nil {
		t.Fatal(err)
	}
	if err := bus.Provision(ctx, b, bustest.TestLayout()); err != nil {
		t.Fatalf("provision over the old bucket: %v", err)
	}
	kv, err := b.KV(ctx, bus.BucketCheckpoints)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.LimitMarkerTTL(), bustest.TestLayout().CheckpointMarkerTTL; got != want {
		t.Errorf("marker TTL after provisioning = %s, want %s", got, want)
	}
	if e, err := kv.Get(ctx, "s"); err != nil || string(e.Value()) != "checkpoint" {
		t.Errorf("checkpoint after provisioning: %v", err)
	}
}

// TestDeadLetterLostAckFailsWithinCallTimeout: a dead letter whose
// publish is never acknowledged (the server that took it died) fails
// after bus.CallTimeout, not when the caller's context (a turn's: ten
// minutes; here three call timeouts) ends.
func TestDeadLetterLostAckFailsWithinCallTimeout(t *testing.T) {
	t.Parallel()
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	if err := b.JS.DeleteStream(ctx, b.Space.DeadLetterStream()); err != nil {
		t.Fatal(err)
	}
	// Takes the dead letter in the stream's place and never acknowledges.
	bustest.Unanswered(t, b, b.Space.DeadLetterAll())
	// Counts the tries: each reaches the subject.
	tries, err := b.NC.SubscribeSync(b.Space.DeadLetterAll())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tries.Unsubscribe() }()
	turnCtx, cancel := context.WithTimeout(ctx, 3*bus.CallTimeout)
	defer cancel()
	err = b.DeadLetter(turnCtx, "inbound", bus.Letter{Subject: "x", Reason: "test", StreamSeq: 1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DeadLetter with no acknowledgement: %v, want a deadline error", err)
	}
	// Both deadlines give the same error: the turn's still live shows
	// that DeadLetter's own ended the wait.
	if turnCtx.Err() != nil {
		t.Errorf("DeadLetter gave up at the turn's deadline, not after its own %s", bus.CallTimeout)
	}
	// The letter has an id, so each try waits AckWait for its ack and
	// the next is sent when it ends: giving up after CallTimeout, not
	// before, is CallTimeout/AckWait tries. The flush returns after the
	// server has delivered every try sent on this connection before it.
	if err := b.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := tries.Pending(); n != int(bus.CallTimeout/bus.AckWait) {
		t.Errorf("DeadLetter gave up after %d tries of %s, want %d (%s)", n, bus.AckWait, bus.CallTimeout/bus.AckWait, bus.CallTimeout)
	}
}

// TestRestartJetStream: the embedded server reopens its streams, and
// re-enables JetStream when it had been disabled, keeping what is stored.
func TestRestartJetStream(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(map[bool]string{false: "enabled", true: "disabled"}[disabled], func(t *testing.T) {
			srv := bustest.StartServer(t)
			b := srv.Connect(t, "")
			if _, err := b.JS.Publish(t.Context(), b.Space.History("s"), []byte("kept")); err != nil {
				t.Fatal(err)
			}
			if disabled {
				if err := srv.NATSServer().DisableJetStream(); err != nil {
					t.Fatal(err)
				}
			}
			if err := srv.RestartJetStream(); err != nil {
				t.Fatal(err)
			}
			st, err := b.JS.Stream(t.Context(), b.Space.HistoryStream())
			if err != nil {
				t.Fatal(err)
			}
			if n := st.CachedInfo().State.Msgs; n != 1 {
				t.Errorf("%d messages after the restart, want 1", n)
			}
			if _, err := b.JS.Publish(t.Context(), b.Space.History("s"), []byte("new")); err != nil {
				t.Errorf("publish after the restart: %v", err)
			}
		})
	}
}
