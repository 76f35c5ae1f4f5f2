package webchat_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket/wsjson"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/webchat"
)

// TestRefusalsReachThePage: a message the fleet refuses shows the reason
// on the page at once.
func TestRefusalsReachThePage(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"storage full", fmt.Errorf("inbound web-1: %w: disk", gateway.ErrStorageFull), "Storage full"},
		{"too large", &gateway.TooLargeError{Size: 900_000, Limit: 800_000}, "Message too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bustest.StartJetStream(t, channels.Assets)
			store, err := session.Open(t.Context(), b)
			if err != nil {
				t.Fatal(err)
			}
			refuse := gateway.InboxFunc(func(context.Context, *nanofleetv1.InboundMessage) error { return tt.err })
			s, err := webchat.New(t.Context(), webchat.Config{Enabled: true, Token: token},
				webchat.Deps{Bus: b, Inbox: refuse, Sessions: store})
			if err != nil {
				t.Fatal(err)
			}
			h := &harness{srv: httptest.NewServer(s), bus: b}
			t.Cleanup(h.srv.Close)
			c := h.client(t)
			_, u := h.conversation(t, c)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			ws := send(ctx, t, c, u, "hi")
			var f struct{ Type, Text string }
			if err := wsjson.Read(ctx, ws, &f); err != nil {
				t.Fatal(err)
			}
			if f.Type != "error" || !strings.Contains(f.Text, tt.want) {
				t.Errorf("frame %+v, want an error saying %q", f, tt.want)
			}
		})
	}
}
