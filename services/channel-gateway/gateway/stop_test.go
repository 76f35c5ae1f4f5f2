package gateway_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
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
	b := bustest.StartJetStream(t, gateway.Assets, access.Assets)
	p := &slowPlatform{started: make(chan struct{})}
	stop := gatewaytest.Run(t, b, slog.New(slog.DiscardHandler), func(context.Context, adapterdeps.Deps, *slog.Logger) (gateway.Adapter, error) {
		return p, nil
	})
	publishReply(t, b, "r-stop", "hello")
	select {
	case <-p.started:
	case <-time.After(10 * time.Second):
		t.Fatal("reply never delivered")
	}
	stop() // waits for the delivery in flight, failing the test if it hangs
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
	if want := "id-" + subject.Token("r-stop"); len(got) != 1 || got[0] != want {
		t.Errorf("delivered bucket holds %q, want the reply's %q", got, want)
	}
}
