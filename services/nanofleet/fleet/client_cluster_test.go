package fleet_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// TestClientSoonFollowsItsConsumerOffAStoppedNode: a CLI client (`nanofleet
// agent` or `chat` joining a cluster) whose reply consumer lives on a node
// that shuts down gets the reply stored after the stop within seconds.
// nats.go makes an ordered consumer again only after two missed idle
// heartbeats; at its default of 5 s the client waited 10 s.
func TestClientSoonFollowsItsConsumerOffAStoppedNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cluster, b := bustest.StartClusterJetStream(t, 3)

	var pending *fleet.Pending
	host := cluster.ConsumerApart(ctx, b, b.Space.OutboundStream(), func(conn *bus.Bus) func() {
		c, err := fleet.NewClient(ctx, conn, "cli")
		if err != nil {
			t.Fatal(err)
		}
		if pending, err = c.Send(ctx, fleet.Request{ChatID: "direct", Text: "hi"}); err != nil {
			t.Fatal(err)
		}
		return c.Close
	})
	// The reply is published through a node that stays up, to a stream
	// it leads: a stream whose leader stops may have none for seconds,
	// which would delay the reply either way.
	other := (host + 1) % 3
	pub, err := bus.Connect(ctx, bus.Config{URL: cluster.URL(other), Name: t.Name() + "-publisher"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	cluster.LeadAway(ctx, pub, b.Space.OutboundStream(), host)

	start := time.Now()
	cluster.Stop(host)
	data, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Id: "r1", ReplyTo: pending.ID(), Channel: "cli", ChatId: "direct",
		Content: "answer", Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, LastOfTurn: true})
	if err := bustest.PublishRetrying(ctx, pub, b.Space.Outbound("cli", "direct"), data); err != nil {
		t.Fatalf("publish the reply: %v", err)
	}
	published := time.Since(start)
	wctx, wcancel := context.WithTimeout(ctx, 90*time.Second)
	defer wcancel()
	replies, err := pending.Wait(wctx)
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	if len(replies) != 1 || replies[0].GetId() != "r1" {
		t.Errorf("replies %v, want r1", replies)
	}
	// A clear margin above the 2 s it takes now, below the 10 s it took.
	const within = 6 * time.Second
	took := time.Since(start)
	t.Logf("node %d stopped; reply stored after %s, received after %s", host, published, took)
	if took > within {
		t.Errorf("reply received %s after the node holding the consumer stopped, want within %s", took, within)
	}
}
