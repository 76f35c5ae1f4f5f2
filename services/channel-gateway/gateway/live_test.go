package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// eager is a live adapter that reports, as its Run starts (when it may
// take its first event, whose turn can show progress at once), whether
// the server already routes the channel's live messages anywhere.
type eager struct {
	interest func() bool
	ran      chan bool
}

func (e *eager) Channel() string { return "eager" }

func (e *eager) Run(ctx context.Context, _ gateway.Inbox) error {
	e.ran <- e.interest()
	<-ctx.Done()
	return nil
}

func (e *eager) Deliver(context.Context, *nanofleetv1.OutboundMessage) error     { return nil }
func (e *eager) DeliverLive(context.Context, *nanofleetv1.OutboundMessage) error { return nil }

// TestLiveFollowedBeforeTheAdapterRuns: the gateway follows a channel's
// live messages, and the server knows it, before the channel's adapter
// runs; it subscribed after starting the adapter, so progress of a turn
// the first event started could be published to nobody (a Slack test
// lost its first progress message under load).
func TestLiveFollowedBeforeTheAdapterRuns(t *testing.T) {
	for range 10 {
		srv := bustest.StartServer(t)
		b := srv.Connect(t, "", gateway.Assets)
		e := &eager{ran: make(chan bool, 1), interest: func() bool {
			return srv.Server().GlobalAccount().SubscriptionInterest(b.Space.Live("eager", "c"))
		}}
		runGatewayOn(t, b, e)
		select {
		case followed := <-e.ran:
			if !followed {
				t.Fatal("the adapter ran before the gateway followed its live messages")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the adapter never ran")
		}
	}
}
