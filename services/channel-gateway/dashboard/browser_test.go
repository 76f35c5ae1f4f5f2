package dashboard_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/browsertest"
)

// browser starts headless Chromium, or skips the test without it.
func browser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.Start(t, 25*time.Second)
}

const webToken = "dashboard-test-token"

// gateway serves the gateway's handler as the binary builds it: the
// dashboard behind the web chat's login.
func gateway(t *testing.T, b *bus.Bus) *httptest.Server {
	t.Helper()
	cfg := channels.Defaults()
	cfg.Web.Token = webToken
	_, handler, err := channels.Build(ctxT(t), cfg, channels.Deps{Bus: b, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

func TestBrowserDashboard(t *testing.T) {
	b := bustest.StartJetStream(t, channels.Assets)
	fleet(t, b)
	// A client's reply consumer left behind by a CLI command that has
	// exited, with a reply it never took.
	client, err := b.JS.OrderedConsumer(ctxT(t), b.Space.OutboundStream(), jetstream.OrderedConsumerConfig{InactiveThreshold: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.JS.Publish(ctxT(t), b.Space.Outbound("cli", "direct"), []byte{1}); err != nil {
		t.Fatal(err)
	}
	srv := gateway(t, b)
	ctx := browser(t)

	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(v)
	}
	const t3Tool = `#turns li.turn[data-turn-id="t3"] li.tool[data-name="read_file"]`
	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/dashboard?token="+webToken),
		chromedp.WaitVisible(t3Tool),
	)
	if err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || strings.Contains(loc, "token") || !strings.HasSuffix(loc, "/dashboard") {
		t.Errorf("address after login = %q (%v)", loc, err)
	}
	if w, r := text("#workers"), text("#tool-runners"); w != "2" || r != "1" {
		t.Errorf("online: %q workers, %q tool runners; want 2 and 1", w, r)
	}
	if f, q := text("#in-flight"), text("#queued"); f != "1" || q != "1" {
		t.Errorf("turns in flight %q, queued %q; want 1 and 1", f, q)
	}
	if tool := text(t3Tool); !strings.Contains(tool, "read_file") || !strings.Contains(tool, "notes.md") || !strings.Contains(tool, "250 ms") {
		t.Errorf("tool call shows %q", tool)
	}
	if d := text(`#turns li.turn[data-turn-id="t3"] .duration`); d != "1.50 s" {
		t.Errorf("turn duration shows %q", d)
	}
	if dl := text("#dead-letters li.dead-letter"); !strings.Contains(dl, "worker crashed") || !strings.Contains(dl, "inbound") {
		t.Errorf("dead letter shows %q", dl)
	}
	if n := text("#dead-letter-count"); n != "1" {
		t.Errorf("dead letter count shows %q", n)
	}
	if s := text(`#streams tbody`); !strings.Contains(s, b.Space.InboundStream()) || !strings.Contains(s, "workers") {
		t.Errorf("streams table shows %q", s)
	}
	if s := text(`#streams tr.consumer.lagging`); !strings.Contains(s, "workers") {
		t.Errorf("lagging consumers show %q, want the workers (1 queued)", s)
	}
	clientRow := `#streams tr.consumer.client`
	if s := text(clientRow); !strings.Contains(s, client.CachedInfo().Name+" (client)") || !strings.Contains(s, "1") {
		t.Errorf("client consumer shows %q", s)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#streams tr.consumer.client.lagging").length`)); err != nil || n != 0 {
		t.Errorf("%d client consumers marked lagging (%v)", n, err)
	}

	// A new turn appears without a reload: the marker set in this page
	// survives.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.stillHere = true`)); err != nil {
		t.Fatal(err)
	}
	publishTurn(t, b, "t4")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#turns li.turn:first-child[data-turn-id="t4"]`)); err != nil {
		t.Fatalf("the new turn did not show: %v", err)
	}
	if still, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.stillHere === true`)); err != nil || !still {
		t.Errorf("the page was reloaded (%v)", err)
	}
	if c := text("#conn"); c != "live" {
		t.Errorf("connection shows %q", c)
	}
}

// TestBrowserDashboardFitsALaptop: at 1280 px the page needs no sideways
// scrolling, long service ids and metadata included.
func TestBrowserDashboardFitsALaptop(t *testing.T) {
	b := bustest.StartJetStream(t, channels.Assets)
	fleet(t, b)
	srv := gateway(t, b)
	ctx := browser(t)
	err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(srv.URL+"/dashboard?token="+webToken),
		chromedp.WaitVisible(`#services tbody tr`),
	)
	if err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	width, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.documentElement.scrollWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if width > 1280 {
		t.Errorf("the page is %v px wide at a 1280 px window", width)
	}
}
