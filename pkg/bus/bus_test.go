package bus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
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
	turnCtx, cancel := context.WithTimeout(ctx, 3*bus.CallTimeout)
	defer cancel()
	start := time.Now()
	err := b.DeadLetter(turnCtx, "inbound", bus.Letter{Subject: "x", Reason: "test", StreamSeq: 1})
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DeadLetter with no acknowledgement: %v, want a deadline error", err)
	}
	// Both deadlines give the same error: the turn's still live shows
	// that DeadLetter's own ended the wait.
	if turnCtx.Err() != nil {
		t.Errorf("DeadLetter gave up at the turn's deadline, not after its own %s", bus.CallTimeout)
	}
	if took < bus.CallTimeout {
		t.Errorf("DeadLetter gave up after %s, want %s", took, bus.CallTimeout)
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

// TestResetPendingRedeliversAtOnce: deliveries pending when a server
// stopped are restored with it and wait out their ack wait (ten minutes
// here); ResetPending hands them out again at once, each consumer from
// its own ack floor, and leaves consumers with nothing pending alone.
func TestResetPendingRedeliversAtOnce(t *testing.T) {
	dir := t.TempDir()
	s1 := bustest.StartServerIn(t, dir)
	b1 := s1.Connect(t, "")
	ctx := t.Context()
	const ackWait = 10 * time.Minute
	st, err := b1.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "RESET_T", Subjects: []string{"reset.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "idle"} {
		if _, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if _, err := b1.JS.Publish(ctx, "reset.x", fmt.Appendf(nil, "m%d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(st jetstream.Stream, consumer string, n int, wait time.Duration) []jetstream.Msg {
		t.Helper()
		c, err := st.Consumer(ctx, consumer)
		if err != nil {
			t.Fatal(err)
		}
		return fetchUpTo(t, c, n, wait)
	}
	// a: m1 and m2 pending. b: m1 acknowledged, m2 pending. idle:
	// nothing asked.
	if got := fetch(st, "a", 2, 5*time.Second); len(got) != 2 {
		t.Fatalf("a fetched %d messages, want 2", len(got))
	}
	got := fetch(st, "b", 2, 5*time.Second)
	if len(got) != 2 {
		t.Fatalf("b fetched %d messages, want 2", len(got))
	}
	if err := got[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	s1.Shutdown()

	s2 := bustest.StartServerIn(t, dir)
	b2 := s2.Connect(t, "")
	st2, err := b2.JS.Stream(ctx, "RESET_T")
	if err != nil {
		t.Fatal(err)
	}
	for _, consumer := range []string{"a", "b"} {
		if got := fetch(st2, consumer, 1, 300*time.Millisecond); len(got) != 0 {
			t.Fatalf("%s was redelivered %q before any reset: a restored delivery waits for its ack wait", consumer, got[0].Data())
		}
	}
	reset, err := bus.ResetPending(ctx, b2.JS)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(reset, func(x, y bus.PendingReset) int { return strings.Compare(x.Consumer, y.Consumer) })
	want := []bus.PendingReset{{Stream: "RESET_T", Consumer: "a", Messages: 2}, {Stream: "RESET_T", Consumer: "b", Messages: 1}}
	if !slices.Equal(reset, want) {
		t.Fatalf("reset %+v, want %+v", reset, want)
	}
	for consumer, want := range map[string][]string{"a": {"m1", "m2"}, "b": {"m2"}} {
		var seen []string
		for _, m := range fetch(st2, consumer, len(want), 5*time.Second) {
			seen = append(seen, string(m.Data()))
		}
		if !slices.Equal(seen, want) {
			t.Errorf("%s redelivered %q after the reset, want %q", consumer, seen, want)
		}
	}
}

// fetchUpTo fetches at most n messages from c, waiting at most wait.
func fetchUpTo(t *testing.T, c jetstream.Consumer, n int, wait time.Duration) []jetstream.Msg {
	t.Helper()
	batch, err := c.Fetch(n, jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	return msgs
}
