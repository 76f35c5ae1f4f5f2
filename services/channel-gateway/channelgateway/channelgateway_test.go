package channelgateway_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channelgateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
)

// TestListenPrecedence: the gateway listens where --listen says, else
// where channels.web.listen says, else on the caller's default.
func TestListenPrecedence(t *testing.T) {
	b := bustest.StartServer(t).Connect(t, "nanofleet", channels.Assets)
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	fromFlag, fromConfig, fromDefault := free(), free(), free()
	tests := []struct {
		name, flag, config, def, want string
	}{
		{"flag over config", fromFlag, fromConfig, fromDefault, fromFlag},
		{"config over default", "", fromConfig, fromDefault, fromConfig},
		{"default", "", "", fromDefault, fromDefault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := config.Defaults()
			data := `{}`
			if tt.config != "" {
				data = fmt.Sprintf(`{"channels":{"web":{"listen":%q}}}`, tt.config)
			}
			if err := config.Parse(file, []byte(data), func(string) string { return "" }); err != nil {
				t.Fatal(err)
			}
			g, err := channelgateway.New(t.Context(), file, channelgateway.Deps{Bus: b, Listen: tt.flag, DefaultListen: tt.def})
			if err != nil {
				t.Fatal(err)
			}
			if got := g.Addr().String(); got != tt.want {
				t.Fatalf("listening on %s, want %s", got, tt.want)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- g.Run(ctx) }()
			cancel()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("gateway did not stop")
			}
		})
	}
}
