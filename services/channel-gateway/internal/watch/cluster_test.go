package watch_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/watch"
)

// TestWatcherKeepsItsStartWhenItsConsumerIsLost: on a 3-node cluster, the
// node holding a watcher's consumer goes down before the first reply, and
// the reply is stored while it is down. The watcher makes its consumer
// again and still delivers that reply. Started "from now" (DeliverNew), the
// consumer made again started from the moment it was made and skipped the
// reply: the API request that waited for it hung until its timeout, though
// the turn had answered (seen with a SIGSTOPped nats-server).
func TestWatcherKeepsItsStartWhenItsConsumerIsLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cluster, b := bustest.StartClusterJetStream(t, 3)

	var w *watch.Watcher
	host := cluster.ConsumerApart(ctx, b, b.Space.OutboundStream(), func(conn *bus.Bus) func() {
		wctx, stop := context.WithCancel(ctx)
		var err error
		if w, err = watch.New(wctx, conn, "api", "c1"); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		return func() { stop(); bustest.Receive(t, done, 10*time.Second) }
	})

	cluster.Stop(host)
	data, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Id: "r1", Channel: "api", ChatId: "c1", Content: "answer", Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL})
	if err := bustest.PublishRetrying(ctx, b, b.Space.Outbound("api", "c1"), data); err != nil {
		t.Fatalf("publish the reply while node %d is down: %v", host, err)
	}
	// The watcher notices its consumer is gone by missed heartbeats
	// (about 10 s) and makes it again: nats.go tries each creation for up
	// to 10 s and waits 1, 2, 4 s between, and a node that went down as
	// the JetStream meta leader can cost a try or two (40 s was not
	// enough twice, both on a loaded machine).
	if got := bustest.Receive(t, w.C, 90*time.Second); got.GetId() != "r1" {
		t.Errorf("watcher delivered %q, want r1", got.GetId())
	}
}
