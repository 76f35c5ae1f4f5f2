package gateway_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// TestReplyLostWithItsConsumersLeader: a gateway on a 3-node cluster
// with its default settings; a reply is stored just before the node
// leading the channel's reply consumer shuts down. Its delivery can be
// lost in flight (the consumer counts it as delivered), and the consumer
// hands it out again only after its ack wait. Not every run loses the
// delivery; a run that does not delivers within a few seconds and passes
// too.
func TestReplyLostWithItsConsumersLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cluster, b := bustest.StartClusterJetStream(t, 3, gateway.Assets)
	// The gateway reaches node 0 first; its consumer is led elsewhere.
	conn := cluster.ConnectThrough(t, 0)
	r := newRecorder()
	var logs lockedBuffer
	runGatewayWith(t, conn, gateway.DefaultConfig(), []gateway.Adapter{r}, gateway.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	publish := func(id string) {
		t.Helper()
		out, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Id: id, Channel: "test", ChatId: "c1", Content: id, Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL})
		if err := bustest.PublishRetrying(ctx, conn, b.Space.Outbound("test", "c1"), out); err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
	}
	publish("r1")
	if m := bustest.Receive(t, r.delivered, time.Minute); m.GetId() != "r1" {
		t.Fatalf("delivered %q, want r1", m.GetId())
	}

	host := cluster.ConsumerLeadAway(ctx, b, b.Space.OutboundStream(), b.Space.GatewayConsumer("test"), 0)
	// Published through node 0, which stays up.
	publish("r2")
	start := time.Now()
	cluster.Stop(host)
	if m := bustest.Receive(t, r.delivered, 2*time.Minute); m.GetId() != "r2" {
		t.Fatalf("delivered %q, want r2", m.GetId())
	}
	took := time.Since(start)
	const within = 40 * time.Second
	t.Logf("delivered %s after node %d, the consumer's leader, stopped", took.Round(time.Millisecond), host)
	if took > within {
		t.Errorf("delivered %s after the consumer's leader stopped, want within %s; log:\n%s", took.Round(time.Millisecond), within, logs.String())
	}
}
