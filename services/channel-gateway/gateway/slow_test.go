package gateway_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// uploadPlatform takes took to accept each reply, as an upload does.
type uploadPlatform struct {
	took      time.Duration
	attempts  *atomic.Int32
	delivered chan *nanofleetv1.OutboundMessage
}

func (s *uploadPlatform) Channel() string { return "test" }

func (s *uploadPlatform) Run(ctx context.Context, _ gateway.Inbox) error {
	<-ctx.Done()
	return nil
}

func (s *uploadPlatform) Deliver(ctx context.Context, m *nanofleetv1.OutboundMessage) error {
	s.attempts.Add(1)
	t := time.NewTimer(s.took)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.delivered <- m
	return nil
}

// TestSlowDeliveryStaysWithItsGateway: an attempt that takes longer than
// the consumer's ack wait keeps its reply (InProgress), so the other
// gateway serving the channel does not send it a second time.
func TestSlowDeliveryStaysWithItsGateway(t *testing.T) {
	b := bustest.StartJetStream(t, gateway.Assets)
	cfg := gateway.DefaultConfig()
	cfg.AckWait = 2 * time.Second
	var attempts atomic.Int32
	delivered := make(chan *nanofleetv1.OutboundMessage, 4)
	for range 2 {
		runGatewayWith(t, b, cfg, []gateway.Adapter{&uploadPlatform{took: 6 * time.Second, attempts: &attempts, delivered: delivered}})
	}
	publishReply(t, b, "upload", "a big file")
	if m := bustest.Receive(t, delivered, 30*time.Second); m.GetId() != "upload" {
		t.Fatalf("delivered %q, want upload", m.GetId())
	}
	if n := attempts.Load(); n != 1 {
		t.Errorf("%d attempts to deliver the reply, want 1 (it was handed to the other gateway while the first sent it)", n)
	}
}
