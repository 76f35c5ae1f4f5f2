package slack_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack/slacktest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// TestStatusWithTwoGateways: two gateways run Slack; one is connected,
// the other cannot reach Slack and retries auth.test. The channel shows
// connected, held by the first, with the second's reason beside it (it
// showed failed: the retrying gateway wrote the channel's one record).
// Once the connected gateway stops or dies, the channel no longer shows
// connected.
func TestStatusWithTwoGateways(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			srv := bustest.StartServer(t)
			reader := srv.Connect(t, "", channels.Assets)
			ctx := t.Context()
			board, err := status.Open(ctx, reader)
			if err != nil {
				t.Fatal(err)
			}
			kv, err := reader.KV(ctx, bus.BucketLeases)
			if err != nil {
				t.Fatal(err)
			}
			shown := func() (status.Channel, error) {
				svcs, err := fleetstatus.Discover(ctx, reader.NC, 200*time.Millisecond)
				if err != nil {
					return status.Channel{}, err
				}
				chans, err := board.Channels(ctx, lease.NewTable(kv), svcs, []string{slack.Channel})
				if err != nil {
					return status.Channel{}, err
				}
				return chans[0], nil
			}
			log := slog.New(slog.DiscardHandler)

			fake := slacktest.New(t)
			connected := startSlack(t, srv.Connect(t, "", channels.Assets), fake.APIURL, log)
			fake.WaitConnected(t, wait)
			down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "upstream unreachable", http.StatusBadGateway)
			}))
			t.Cleanup(down.Close)
			retrying := startSlack(t, srv.Connect(t, "", channels.Assets), down.URL+"/", log)

			bustest.Eventually(t, 2*wait, func() error {
				c, err := shown()
				if err != nil {
					return err
				}
				if c.State != status.Connected || c.Holder != connected.ID() || c.Account != "@nano" {
					return fmt.Errorf("slack = %+v, want connected on %s", c.Record, connected.ID())
				}
				if len(c.Others) != 1 || c.Others[0].Gateway != retrying.ID() || c.Others[0].State != status.Failed ||
					!strings.HasPrefix(c.Others[0].Reason, "slack auth.test failed, retrying: ") {
					return fmt.Errorf("slack's other gateways = %+v, want %s failing auth.test", c.Others, retrying.ID())
				}
				return nil
			})

			if kill {
				connected.Kill()
			} else {
				connected.Stop()
			}
			bustest.Eventually(t, 2*wait, func() error {
				c, err := shown()
				if err != nil {
					return err
				}
				if c.State != status.Failed || c.Holder != retrying.ID() || !strings.HasPrefix(c.Reason, "slack auth.test failed, retrying: ") || len(c.Others) != 0 {
					return fmt.Errorf("slack = %+v (others %+v), want failed on %s only", c.Record, c.Others, retrying.ID())
				}
				return nil
			})
		})
	}
}

// startSlack runs a gateway with a Slack adapter calling the Web API at
// apiURL, on its own connection b.
func startSlack(t *testing.T, b *bus.Bus, apiURL string, log *slog.Logger) *gatewaytest.Gateway {
	t.Helper()
	cfg := slack.Config{BotToken: "xoxb-test", AppToken: "xapp-test", APIURL: apiURL}
	cfg.Enabled = true
	return gatewaytest.Start(t, b, log, func(ctx context.Context, deps adapterdeps.Deps, log *slog.Logger) (gateway.Adapter, error) {
		return slack.New(ctx, cfg, deps, slack.WithLogger(log))
	})
}
