package feishu_test

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu/feishutest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
)

// webhookKey is the encrypt key of startWebhook's harness.
const webhookKey = "encrypt-key-1"

// startWebhook starts a harness in webhook mode (echoing worker), serves
// its handler, and returns its URL once the handler took event.
func startWebhook(t *testing.T, event map[string]any) (*harness, string) {
	t.Helper()
	cfg := feishu.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}, Mode: feishu.ModeWebhook, EncryptKey: webhookKey, VerificationToken: "vt"}
	h := start(t, cfg, workertest.Echo)
	srv := httptest.NewServer(h.adapter.WebhookHandler())
	t.Cleanup(srv.Close)
	url := srv.URL + "/hooks/feishu"
	waitWebhook(t, url, webhookKey, event)
	return h, url
}

// waitWebhook posts a signed event until the handler takes it: it
// answers 503 until Run has started.
func waitWebhook(t *testing.T, url, key string, event map[string]any) {
	t.Helper()
	bustest.Eventually(t, wait, func() error {
		switch code := feishutest.Webhook(t, url, key, event, true); code {
		case 200:
			return nil
		case 503:
			return fmt.Errorf("signed webhook: %d", code)
		default:
			t.Fatalf("signed webhook: %d", code)
			return nil
		}
	})
}

// TestWebhookReplaysAreRefused: a signed request whose timestamp is
// further than feishu.ReplayWindow from now, or whose nonce was already
// handled, is refused with 401 and logged; one inside the window is
// taken.
func TestWebhookReplaysAreRefused(t *testing.T) {
	const key = webhookKey
	h, url := startWebhook(t, feishutest.Text("ev-0", "ou_ada", "oc_p2p", "p2p", "om_0", "warm-up"))
	now := time.Now()
	tests := []struct {
		name  string
		at    time.Time
		nonce string
		event string // its event id and text
		want  int
	}{
		{"older than the window", now.Add(-feishu.ReplayWindow - time.Minute), "n-old", "ev-old", 401},
		{"ahead of the window", now.Add(feishu.ReplayWindow + time.Minute), "n-ahead", "ev-ahead", 401},
		{"fresh", now, "n-1", "ev-fresh", 200},
		{"the fresh one replayed", now, "n-1", "ev-fresh", 401},
		{"its nonce on another event", now, "n-1", "ev-other", 401},
		{"inside the window", now.Add(-feishu.ReplayWindow + time.Minute), "n-2", "ev-inside", 200},
	}
	refused := 0
	for _, tt := range tests {
		ev := feishutest.Text(tt.event, "ou_ada", "oc_p2p", "p2p", "om_"+tt.event, tt.event)
		if code := feishutest.WebhookAt(t, url, key, ev, true, tt.at, tt.nonce); code != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, code, tt.want)
		}
		if tt.want == 401 {
			refused++
		}
	}
	waitWebhook(t, url, key, feishutest.Text("ev-last", "ou_ada", "oc_p2p", "p2p", "om_last", "sentinel"))
	if got := h.Worker.ContentsUntil(t, "sentinel", wait); len(got) != 4 || got[1] != "ev-fresh" || got[2] != "ev-inside" {
		t.Errorf("worker got %q, want warm-up, ev-fresh, ev-inside, sentinel", got)
	}
	// Refusals are logged throttled (TestWebhookRefusalsAreLoggedThrottled):
	// the first at least.
	if n := h.logs.Count("refused as a replay"); n < 1 || n > refused {
		t.Errorf("%d replay log lines for %d refusals, want 1 to %[2]d:\n%s", n, refused, h.logs)
	}
}
