package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// TestClientLeavesNoConsumer: a closed client's reply consumer is gone
// from the outbound stream when Close returns (before, it went within its
// inactive threshold, 30 s). With nats.go's default for ordered
// consumers it stayed 5 minutes: each `nanofleet agent` left one behind. On a 3-node cluster after a few
// minutes of CLI turns the outbound stream had 77 consumers, most of them
// these; with one node killed, listing them took 16–20 s and `nanofleet
// status` failed ("consumers of NANOFLEET_OUT: context deadline
// exceeded") until they were gone.
func TestClientLeavesNoConsumer(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := fleet.NewClient(ctx, b, "cli")
	if err != nil {
		t.Fatal(err)
	}
	stream, err := b.JS.Stream(ctx, b.Space.OutboundStream())
	if err != nil {
		t.Fatal(err)
	}
	consumers := func() int {
		names, err := bustest.Consumers(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		return len(names)
	}
	if n := consumers(); n != 1 {
		t.Fatalf("%d consumers on the outbound stream while the client runs, want 1", n)
	}
	c.Close()
	if n := consumers(); n != 0 {
		t.Errorf("%d consumers left on the outbound stream after Close", n)
	}
}

// TestSendGivesUpOnALostPublish: a publish no stream acks (lost with a
// server that died) fails Send within bus.CallTimeout instead of holding
// the caller until its context ends (the CLI gives a turn 15 minutes).
func TestSendGivesUpOnALostPublish(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // as long as a turn may take
	defer cancel()
	c, err := fleet.NewClient(ctx, b, "cli")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The inbound stream gone and something on its subjects that never
	// answers: the publish waits for an ack that does not come.
	if err := b.JS.DeleteStream(ctx, b.Space.InboundStream()); err != nil {
		t.Fatal(err)
	}
	sink, err := b.NC.Subscribe(b.Space.InboundAll(), func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sink.Unsubscribe() }()
	done := make(chan error, 1)
	go func() {
		_, err := c.Send(ctx, fleet.Request{ChatID: "direct", Text: "hello"})
		done <- err
	}()
	if err := bustest.Receive(t, done, 2*bus.CallTimeout); err == nil {
		t.Error("Send succeeded though nothing stored the message")
	}
}

// TestSendWaitsForAStreamLeader: a message sent while the inbound stream
// has no leader (its node died, and the other replicas take seconds to
// elect another) is sent once the stream has one again. Send failed at
// once: `nanofleet chat` printed "error: publish: nats: no response from
// stream" for every line typed in the 9–10 s an election took after a
// node was killed, and dropped them.
func TestSendWaitsForAStreamLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cluster, b := bustest.StartClusterJetStream(t, 3)
	c, err := fleet.NewClient(ctx, b, "cli")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Without quorum the inbound stream has no leader: its subjects
	// answer nobody.
	cluster.LoseQuorum(ctx, b, b.Space.Inbound("probe", "p"))
	took, err := cluster.RegainQuorum(func() error {
		_, err := c.Send(ctx, fleet.Request{ChatID: "direct", Text: "hello"})
		return err
	})
	if err != nil {
		t.Fatalf("send while the stream elected a leader: %v", err)
	}
	t.Logf("sent %s after the node was started again", took.Round(time.Millisecond))
	stream, err := b.JS.Stream(ctx, b.Space.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.GetLastMsgForSubject(ctx, b.Space.Inbound("cli", "direct")); err != nil {
		t.Errorf("the message is not in the inbound stream: %v", err)
	}
}
