package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// slowPlatform is an adapter whose platform takes a reply while the
// gateway is stopping: Deliver reports that it started, and succeeds once
// its context was cancelled.
type slowPlatform struct {
	recorder
	started chan struct{}
}

func (s *slowPlatform) Deliver(ctx context.Context, m *nanofleetv1.OutboundMessage) error {
	close(s.started)
	<-ctx.Done()
	return nil
}

// TestDeliveryFinishedWhileStoppingIsRemembered: a reply the platform
// took while the gateway was stopping is recorded as delivered, so that
// a redelivery (its ack lost with the process) does not send it again.
func TestDeliveryFinishedWhileStoppingIsRemembered(t *testing.T) {
	b := bustest.StartJetStream(t, gateway.Assets)
	p := &slowPlatform{started: make(chan struct{})}
	stop := runGateway(t, b, p)
	publishReply(t, b, "r-stop", "hello")
	select {
	case <-p.started:
	case <-time.After(10 * time.Second):
		t.Fatal("reply never delivered")
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("gateway did not stop")
	}
	kv, err := b.KV(t.Context(), gateway.BucketDelivered)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range keys.Keys() {
		got = append(got, k)
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "id-") {
		t.Errorf("delivered bucket holds %q, want the reply's id", got)
	}
}
