package dingtalk_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk/dingtalktest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// TestRedeliveryAfterALostAckSendsNothingTwice: DingTalk has no
// idempotency key, so each piece DingTalk took is recorded fleet-wide
// before the next starts. Gateway A is cut off between DingTalk taking a
// piece and the ack; the reply is then redelivered to gateway B (another
// adapter on the same bus), which must send only what A did not: in all,
// each piece reaches DingTalk exactly once.
func TestRedeliveryAfterALostAckSendsNothingTwice(t *testing.T) {
	first, second := strings.Repeat("one ", 900), strings.Repeat("two ", 900) // two pieces at dingtalk.Limit
	tests := []struct {
		name    string
		content string
		// cut scripts the fake and stops A's delivery (its context is
		// cancel); it returns after the fake saw A's sends.
		cut func(t *testing.T, fake *dingtalktest.Server, cancel func())
		// wantA is whether A's Deliver succeeds; resent what B sends.
		wantA  bool
		resent []string
	}{
		{
			name: "stopped while DingTalk answers", content: "just once", wantA: true,
			cut: func(t *testing.T, fake *dingtalktest.Server, cancel func()) {
				hold := make(chan struct{})
				fake.Fail("otosend", dingtalktest.Failure{Hold: hold})
				fake.Next(t, wait, "otosend") // DingTalk has it; its answer is held
				cancel()                      // the gateway stops
				close(hold)
			},
		},
		{
			name: "failed after the first piece", content: first + "\n\n" + second, resent: []string{strings.TrimSpace(second)},
			cut: func(t *testing.T, fake *dingtalktest.Server, cancel func()) {
				fake.Fail("otosend", dingtalktest.Failure{Hold: closed()}, dingtalktest.Failure{Status: 500, Code: "ServiceUnavailable"})
				fake.Next(t, wait, "otosend")
				fake.Next(t, wait, "otosend")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := dingtalktest.New(t)
			b := bustest.StartJetStream(t, channels.Assets)
			log := slog.New(slog.DiscardHandler)
			gate, err := access.Open(t.Context(), b, log)
			if err != nil {
				t.Fatal(err)
			}
			cfg := dingtalk.Config{ClientID: dingtalktest.ClientID, ClientSecret: dingtalktest.ClientSecret, APIURL: fake.URL}
			cfg.Enabled = true
			adapter := func() *dingtalk.Adapter {
				a, err := dingtalk.New(t.Context(), cfg, dingtalk.Deps{Bus: b, Gate: gate, Log: log})
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			msg := &nanofleetv1.OutboundMessage{Id: "17:0", Channel: dingtalk.Channel, ChatId: "staff-ada", Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, Content: tt.content}

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- adapter().Deliver(ctx, msg) }()
			tt.cut(t, fake, cancel)
			select {
			case err := <-done:
				var de *gateway.DeliveryError
				if tt.wantA && err != nil || !tt.wantA && (!errors.As(err, &de) || !de.Retryable) {
					t.Fatalf("gateway A's delivery: %v (want success: %v, else a retry)", err, tt.wantA)
				}
			case <-time.After(wait):
				t.Fatal("gateway A's delivery did not end")
			}

			if err := adapter().Deliver(t.Context(), msg); err != nil {
				t.Fatalf("gateway B's delivery: %v", err)
			}
			for _, want := range tt.resent {
				if _, text := fake.Next(t, wait, "otosend").Markdown(); text != want {
					t.Errorf("B sent %.20q…, want %.20q…", text, want)
				}
			}
			fake.None(t, 300*time.Millisecond, "otosend", "groupsend", "webhook")
		})
	}
}

func closed() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
