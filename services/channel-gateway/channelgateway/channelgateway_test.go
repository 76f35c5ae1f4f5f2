package channelgateway_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/observe/observetest"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channelgateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// TestListenPrecedence: the gateway listens where --listen says, else
// where channels.web.listen says, else on the caller's default.
func TestListenPrecedence(t *testing.T) {
	b := bustest.StartServer(t).Connect(t, "nanofleet", channels.Assets)
	free := func() string { return fmt.Sprintf("127.0.0.1:%d", bustest.FreePort(t)) }
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
			// Run and stop it at once; only where New listens is checked here.
			_ = svctest.Run(t, g.Run, svctest.StopWithin(15*time.Second))()
		})
	}
}

// TestSlowClientsHoldNothing: a client that declares a body and never
// sends it, on routes that answer without reading it (before any login),
// gets its answer once the read timeout passes and its connection
// closed, and an idle keep-alive connection is closed too; the server no
// longer waits on either for good.
func TestSlowClientsHoldNothing(t *testing.T) {
	b := bustest.StartServer(t).Connect(t, "nanofleet", channels.Assets)
	g := runGateway(t, b, `{"channels":{"web":{"enabled":true,"listen":"127.0.0.1:0"},"api":{"enabled":true}}}`, 500*time.Millisecond)
	const unsent = "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
	for _, tt := range []struct{ name, req string }{
		{"api without key", "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n" + unsent},
		{"web chat without login", "POST /api/web/conversations HTTP/1.1\r\nHost: localhost\r\n" + unsent},
		{"dashboard without login", "GET /dashboard/api/snapshot HTTP/1.1\r\nHost: localhost\r\n" + unsent},
		{"static file", "GET /static/nothing-here HTTP/1.1\r\nHost: localhost\r\n" + unsent},
		{"unknown route", "POST /no/such/route HTTP/1.1\r\nHost: localhost\r\n" + unsent},
		{"idle keep-alive", "GET /static/nothing-here HTTP/1.1\r\nHost: localhost\r\n\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			answer, err := observetest.Exchange(t, g.Addr().String(), tt.req)
			if err != nil || !strings.HasPrefix(answer, "HTTP/1.1 4") {
				t.Fatalf("answer %q, %v; want a 4xx and the connection closed", answer, err)
			}
		})
	}
}

// TestLongAnswerOutlivesReadTimeout: the read timeout ends with the
// body; an API request whose turn takes longer still gets its answer.
func TestLongAnswerOutlivesReadTimeout(t *testing.T) {
	const readTimeout = 300 * time.Millisecond
	b := bustest.StartJetStream(t, channels.Assets)
	// The worker holds the answer back for well over the read timeout.
	workertest.Start(t, b, workertest.Echo, workertest.HoldUntil(nil, 6*readTimeout))
	g := runGateway(t, b, `{"channels":{"web":{"listen":"127.0.0.1:0"},"api":{"enabled":true,"token":"sk-test-12345"}}}`, readTimeout)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+g.Addr().String()+"/v1/chat/completions",
		strings.NewReader(`{"model":"nanofleet","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-test-12345")
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "echo: hi") {
		t.Fatalf("%s %q, %v; want 200 with the echo", resp.Status, body, err)
	}
}

// runGateway runs a gateway of the config data with the given read
// timeout until the test ends.
func runGateway(t *testing.T, b *bus.Bus, data string, readTimeout time.Duration) *channelgateway.Gateway {
	t.Helper()
	return runGatewayWith(t, data, channelgateway.Deps{Bus: b}, channelgateway.WithReadTimeout(readTimeout))
}

// runGatewayWith runs a gateway of the config data with deps and opts
// until the test ends.
func runGatewayWith(t *testing.T, data string, deps channelgateway.Deps, opts ...channelgateway.Option) *channelgateway.Gateway {
	t.Helper()
	file := config.Defaults()
	if err := config.Parse(file, []byte(data), func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	g, err := channelgateway.New(t.Context(), file, deps, opts...)
	if err != nil {
		t.Fatal(err)
	}
	svctest.Run(t, g.Run, svctest.StopWithin(15*time.Second))
	return g
}

// TestOversizeHeadersRefused: a request whose header is larger than
// MaxHeaderBytes is refused with 431 on every route before any login is
// checked, so that a stranger's connection cannot make the gateway hold a
// megabyte of header each (net/http's default); a header of the size
// browsers send still reaches its route.
func TestOversizeHeadersRefused(t *testing.T) {
	b := bustest.StartServer(t).Connect(t, "nanofleet", channels.Assets)
	g := runGateway(t, b, `{"channels":{"web":{"enabled":true,"listen":"127.0.0.1:0"},"api":{"enabled":true}}}`, 5*time.Second)
	// lines is n header lines of size bytes each.
	lines := func(n, size int) string {
		var sb strings.Builder
		for i := range n {
			fmt.Fprintf(&sb, "X-Pad-%d: %s\r\n", i, strings.Repeat("a", size))
		}
		return sb.String()
	}
	for _, tt := range []struct {
		name, req, want string
	}{
		{"one huge header, api without key", "GET /v1/models HTTP/1.1\r\nHost: localhost\r\n" + lines(1, 2*channelgateway.MaxHeaderBytes), "HTTP/1.1 431"},
		{"many headers, web chat without login", "POST /api/web/conversations HTTP/1.1\r\nHost: localhost\r\n" + lines(32, channelgateway.MaxHeaderBytes/16), "HTTP/1.1 431"},
		{"huge cookie, dashboard", "GET /dashboard/api/live HTTP/1.1\r\nHost: localhost\r\nCookie: nanofleet_web=" + strings.Repeat("c", 2*channelgateway.MaxHeaderBytes) + "\r\n", "HTTP/1.1 431"},
		{"many headers, static file", "GET /static/nothing-here HTTP/1.1\r\nHost: localhost\r\n" + lines(200, 1024), "HTTP/1.1 431"},
		{"browser-sized headers reach the route", "GET /v1/models HTTP/1.1\r\nHost: localhost\r\n" + lines(16, 1024), "HTTP/1.1 401"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			answer, _ := observetest.Exchange(t, g.Addr().String(), tt.req+"Connection: close\r\n\r\n")
			if !strings.HasPrefix(answer, tt.want) {
				t.Fatalf("answer %.80q; want %s", answer, tt.want)
			}
		})
	}
}

// TestConnectionsBeyondTheBoundRefused: with channels.web.maxConnections
// open (here two clients that send nothing), one more connection is
// answered 503 and counted, instead of taking another of the process's
// file descriptors.
func TestConnectionsBeyondTheBoundRefused(t *testing.T) {
	b := bustest.StartServer(t).Connect(t, "nanofleet", channels.Assets)
	m := observe.NewMetrics(nil)
	g := runGatewayWith(t, `{"channels":{"web":{"enabled":true,"listen":"127.0.0.1:0","maxConnections":2}}}`, channelgateway.Deps{Bus: b, Metrics: m})
	// Connections are accepted in the order they were made: these two
	// take the slots.
	for range 2 {
		c, err := net.Dial("tcp", g.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	answer, err := observetest.Exchange(t, g.Addr().String(), "GET /static/nothing-here HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	if err != nil || !strings.HasPrefix(answer, "HTTP/1.1 503") || !strings.Contains(answer, "too many connections") {
		t.Fatalf("answer %q, %v; want 503 too many connections", answer, err)
	}
	if n := testutil.ToFloat64(m.HTTPConnectionsRefused); n != 1 {
		t.Errorf("nanofleet_http_connections_refused_total = %v, want 1", n)
	}
}

// TestStatusRecordsLiveWithTheGateway: a gateway's status records are
// written as the id it announces in discovery, so readers count them
// while it runs, and it withdraws them when it stops: the bucket does not
// keep a record for every gateway ever started.
func TestStatusRecordsLiveWithTheGateway(t *testing.T) {
	b := bustest.StartServer(t).Connect(t, "nanofleet", channels.Assets)
	file := config.Defaults()
	if err := config.Parse(file, []byte(`{"channels":{"web":{"enabled":true,"listen":"127.0.0.1:0"},"api":{"enabled":true}}}`), func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	g, err := channelgateway.New(t.Context(), file, channelgateway.Deps{Bus: b})
	if err != nil {
		t.Fatal(err)
	}
	stop := svctest.Run(t, g.Run, svctest.StopWithin(15*time.Second))
	board, err := status.Open(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := b.KV(t.Context(), bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 10*time.Second, func() error {
		svcs, err := fleetstatus.Discover(t.Context(), b.NC, 200*time.Millisecond)
		if err != nil {
			return err
		}
		chans, err := board.Channels(t.Context(), lease.NewTable(kv), svcs, []string{"web", "api"})
		if err != nil {
			return err
		}
		for _, c := range chans {
			if c.State != status.Connected || c.Holder == "" {
				return fmt.Errorf("%s = %+v, want connected on the running gateway", c.Channel, c.Record)
			}
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	recs, err := board.Records(t.Context(), "")
	if err != nil || len(recs) != 0 {
		t.Errorf("records after the gateway stopped = %+v, %v; want none", recs, err)
	}
}
