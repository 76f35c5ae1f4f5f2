package whatsapp_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.mau.fi/whatsmeow"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp/whatsapptest"
)

func TestTakeoverLosesNothingAndAnswersOnce(t *testing.T) {
	h := newHarness(t, workertest.Echo)
	_, killA, _ := h.gatewayOn(t, h.srv.Connect(t, "", channels.Assets), whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}})
	h.fake.Scan(t, wait)
	h.gateway(t, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}})
	h.fake.Emit(whatsapptest.DM("3EB0-1", "15550001", "before"))
	if s := h.fake.Next(t, wait); s.Text() != "echo: before" || s.Conn != 1 {
		t.Fatalf("before the takeover: %q from connection %d", s.Text(), s.Conn)
	}
	leases := bustest.WatchLeases(t, h.bus, whatsapp.Channel+"-conn-")
	killA() // its lease stays until the TTL ends
	// Sent while no gateway holds the connection: WhatsApp keeps them.
	for _, id := range []string{"3EB0-2", "3EB0-3"} {
		h.fake.Emit(whatsapptest.DM(id, "15550001", "during "+id))
	}
	// The waiting gateway takes over because the dead holder's lease
	// expired, not by a release or a steal.
	leases.TakeoverAfterExpiry(t, bustest.TestLayout().LeaseTTL, wait)
	got := adaptertest.Texts(t, suiteFake{Server: h.fake}, 2)
	h.fake.Emit(whatsapptest.DM("3EB0-4", "15550001", "sentinel"))
	got["echo: sentinel"] = 0
	for k, v := range adaptertest.Texts(t, suiteFake{Server: h.fake}, 1) {
		got[k] += v
	}
	want := map[string]int{"echo: during 3EB0-2": 1, "echo: during 3EB0-3": 1, "echo: sentinel": 1}
	if len(got) != len(want) {
		t.Errorf("replies = %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("replies = %v, want %v", got, want)
		}
	}
	if n := h.fake.Connections(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// TestMessageNotStoredIsGivenAgain: a message the connection's holder
// cannot store (its NATS connection is gone) is not acknowledged, so
// WhatsApp gives it again to the next connection, here the gateway that
// takes the account over, which stores and answers it. Acknowledged on
// receipt, as whatsmeow does by default, it was lost.
func TestMessageNotStoredIsGivenAgain(t *testing.T) {
	h := newHarness(t, workertest.Echo)
	cfg := whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}
	conn := h.srv.Connect(t, "", channels.Assets)
	_, killA, _ := h.gatewayOn(t, conn, cfg)
	h.fake.Scan(t, wait)
	h.gateway(t, cfg)
	leases := bustest.WatchLeases(t, h.bus, whatsapp.Channel+"-conn-")
	conn.NC.Close() // the holder keeps WhatsApp but cannot store
	h.fake.Emit(whatsapptest.DM("3EB0-N1", "15550001", "kept?"))
	h.logs.WaitFor(t, "gives it again at the next connection", wait)
	leases.TakeoverAfterExpiry(t, bustest.TestLayout().LeaseTTL, wait)
	if s := h.fake.Next(t, wait); s.Text() != "echo: kept?" || s.Conn != 2 {
		t.Errorf("after the takeover: %q from connection %d", s.Text(), s.Conn)
	}
	killA()
}

func TestDeliveryFromAGatewayWithoutTheConnection(t *testing.T) {
	h := newHarness(t, workertest.Echo)
	h.gateway(t, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}})
	h.fake.Scan(t, wait)
	// The second gateway waits for the lease; what it delivers goes
	// through the holder.
	_, _, standby := h.gatewayOn(t, h.bus, whatsapp.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}})
	bustest.Eventually(t, wait, func() error {
		if !strings.Contains(h.logs.String(), "waiting to take over") {
			return errors.New("the second gateway is not waiting for the lease yet")
		}
		return nil
	})
	tests := []struct {
		name   string
		fail   error
		sent   bool
		permit bool // the error is worth a retry
	}{
		{"sent by the holder", nil, true, false},
		{"the holder's permanent failure", whatsmeow.ErrRecipientADJID, false, false},
		{"the holder's transient failure", whatsmeow.ErrNotConnected, false, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fail != nil {
				h.fake.FailSends(tt.fail)
			}
			msg := &nanofleetv1.OutboundMessage{
				Id: fmt.Sprintf("reply-%d", i), Channel: whatsapp.Channel, ChatId: "15550001@s.whatsapp.net",
				Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, Content: "**forwarded**",
			}
			err := standby.Deliver(t.Context(), msg)
			var de *gateway.DeliveryError
			switch {
			case tt.sent && err != nil:
				t.Fatalf("Deliver = %v", err)
			case !tt.sent && (!errors.As(err, &de) || de.Retryable != tt.permit):
				t.Fatalf("Deliver = %v, want a delivery error, retryable %v", err, tt.permit)
			}
			if tt.sent {
				if s := h.fake.Next(t, wait); s.Text() != "*forwarded*" || s.Conn != 1 {
					t.Errorf("sent %q by connection %d", s.Text(), s.Conn)
				}
			}
		})
	}
	// And through the fleet: replies taken by either gateway arrive once.
	want := map[string]int{}
	for i := range 8 {
		id := "3EB0F" + string(rune('A'+i))
		h.fake.Emit(whatsapptest.DM(id, "15550001", id))
		want["echo: "+id] = 1
	}
	got := adaptertest.Texts(t, suiteFake{Server: h.fake}, len(want))
	for k := range want {
		if got[k] != 1 {
			t.Errorf("replies = %v", got)
			break
		}
	}
}
