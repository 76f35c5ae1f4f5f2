package bus_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
)

// TestNakWithDelayWaitsForAConsumerLeader: a nak sent while the consumer
// has no leader (here its cluster lost quorum; in a fleet, the node
// leading it was killed) reaches the consumer once it has one again, and
// the message comes back after the nak's delay, not its ack wait. With
// m.NakWithDelay the nak was lost: every turn that failed on the bus when
// the node leading the inbound stream was killed waited out the workers'
// ack wait (30.2 s, measured on a 3-node cluster) before it ran again.
func TestNakWithDelayWaitsForAConsumerLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cluster, b := bustest.StartClusterJetStream(t, 3)
	_, cons := oneJob(ctx, t, b, 3)
	// A consumer just made may have no leader yet: a fetch then ends at
	// once, empty (seen once in a CI-style run: "first fetch: 0
	// messages" after 1.3 s). Fetch until the message comes.
	var first []jetstream.Msg
	bustest.Eventually(t, 30*time.Second, func() error {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			first = append(first, m)
		}
		if len(first) == 0 {
			return fmt.Errorf("first fetch: no message (%v)", batch.Error())
		}
		return nil
	})

	// Without quorum the consumer has no leader: its acks reach nobody.
	cluster.Stop(1)
	cluster.Stop(2)
	bustest.Eventually(t, time.Minute, func() error {
		_, err := b.NC.Request(first[0].Reply(), []byte("+WPI"), 2*time.Second)
		if !errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("in-progress ack without quorum: %v, want %v", err, nats.ErrNoResponders)
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- bus.NakWithDelay(ctx, b.NC, first[0], 100*time.Millisecond) }()
	cluster.Start(1)
	if err := bustest.Receive(t, done, time.Minute); err != nil {
		t.Fatalf("nak while the consumer elected a leader: %v", err)
	}
	bustest.Eventually(t, time.Minute, func() error {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		var m jetstream.Msg
		select {
		case m = <-batch.Messages(): // closed at the fetch's expiry
		case <-time.After(5 * time.Second):
		}
		if m == nil {
			return fmt.Errorf("not redelivered yet (%v)", batch.Error())
		}
		if md, err := m.Metadata(); err != nil || md.NumDelivered != 2 {
			return fmt.Errorf("fetched %v (%v), want the nak'ed message's second delivery", md, err)
		}
		return nil
	})
}
