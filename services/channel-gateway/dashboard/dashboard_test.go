package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus/fleetstatustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dashboard"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// gate accepts the bearer token "secret" or the cookie a login with it
// sets.
type gate struct{}

func (gate) Authorized(r *http.Request) bool {
	if c, err := r.Cookie("login"); err == nil && c.Value == "ok" {
		return true
	}
	return r.Header.Get("Authorization") == "Bearer secret"
}

func (gate) LogIn(w http.ResponseWriter, r *http.Request, token string) bool {
	if token != "secret" {
		return false
	}
	http.SetCookie(w, &http.Cookie{Name: "login", Value: "ok", Path: "/"})
	return true
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func serve(t *testing.T, b *bus.Bus) *httptest.Server {
	t.Helper()
	d, err := dashboard.New(dashboard.Config{}, dashboard.Deps{Bus: b, Gate: gate{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return srv
}

func TestAccess(t *testing.T) {
	srv := serve(t, bustest.StartJetStream(t, channels.Assets))
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		name, path, auth string
		code             int
		body             string
	}{
		{"page without login shows the login form", "/dashboard", "", http.StatusOK, `action="/dashboard"`},
		{"wrong token", "/dashboard?token=nope", "", http.StatusUnauthorized, `name="token"`},
		{"login link redirects", "/dashboard?token=secret", "", http.StatusSeeOther, ""},
		{"page with login", "/dashboard", "secret", http.StatusOK, `id="turns"`},
		{"trailing slash", "/dashboard/", "secret", http.StatusOK, `id="turns"`},
		{"snapshot needs the login", "/dashboard/api/snapshot", "", http.StatusUnauthorized, "not logged in"},
		{"live needs the login", "/dashboard/api/live", "", http.StatusUnauthorized, "not logged in"},
		{"snapshot with login", "/dashboard/api/snapshot", "secret", http.StatusOK, `"streams"`},
		{"static files are public", "/dashboard/static/app.js", "", http.StatusOK, "WebSocket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", "Bearer "+tt.auth)
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.body) {
				t.Errorf("GET %s = %d %.120q; want %d with %q", tt.path, resp.StatusCode, body, tt.code, tt.body)
			}
			if tt.code == http.StatusSeeOther {
				if loc := resp.Header.Get("Location"); loc != "/dashboard" || len(resp.Cookies()) != 1 {
					t.Errorf("login: Location %q, cookies %v", loc, resp.Cookies())
				}
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg dashboard.Config
		ok  bool
	}{
		{dashboard.Config{}, true},
		{dashboard.Config{Interval: time.Second, DiscoverWait: 200 * time.Millisecond, RecentTurns: 50, DeadLetters: 5}, true},
		{dashboard.Config{Interval: 100 * time.Millisecond}, false},
		{dashboard.Config{Interval: time.Second, DiscoverWait: 2 * time.Second}, false},
		{dashboard.Config{RecentTurns: 501}, false},
		{dashboard.Config{DeadLetters: -1}, false},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, config.ErrInvalid)) {
			t.Errorf("Validate(%+v) = %v", tt.cfg, err)
		}
	}
}

// fleet is a fleet with something to show: two workers and a tool runner
// (with an MCP server's tools, registered as a service of its own name)
// online, one turn in flight and one queued, three committed turns and a
// dead letter.
func fleet(t *testing.T, b *bus.Bus) {
	t.Helper()
	ctx := ctxT(t)
	for _, s := range []struct {
		name string
		meta map[string]string
	}{
		{fleetstatus.WorkerService, map[string]string{"instance": "w1"}},
		{fleetstatus.WorkerService, map[string]string{"instance": "w2"}},
		{fleetstatus.ToolRunnerService, map[string]string{"instance": "r1", "runner": "aio-Yx3kqPzL8d2fVbN0aRt6uWm1cJ4hG7sE-toolrunner-0"}},
		{fleetstatus.ToolRunnerService, map[string]string{"instance": "r1", fleetstatus.MCPServerKey: "memory"}},
	} {
		fleetstatustest.Online(t, b, s.name, s.meta)
	}
	fleetstatustest.InFlight(t, b, 2)
	for _, id := range []string{"t1", "t2", "t3"} {
		publishTurn(t, b, id)
	}
	err := b.DeadLetter(ctx, "inbound", bus.Letter{Subject: b.Space.Inbound("web", "c9"), Data: []byte{1}, StreamSeq: 42, Deliveries: 4, Reason: "turn failed 3 times: worker crashed"})
	if err != nil {
		t.Fatal(err)
	}
}

// publishTurn commits a turn that read a file for 250 ms and took 1.5 s.
func publishTurn(t *testing.T, b *bus.Bus, id string) {
	t.Helper()
	at := time.Now().Add(-2 * time.Second)
	ts := func(ms int) *timestamppb.Timestamp {
		return timestamppb.New(at.Add(time.Duration(ms) * time.Millisecond))
	}
	rec := &nanofleetv1.TurnRecord{
		TurnId: id, SessionKey: "web:c1", SenderId: "u1",
		Usage: &nanofleetv1.TokenUsage{PromptTokens: 300, CompletionTokens: 30, CachedTokens: 100, ReasoningTokens: 3, ModelCalls: 2, Model: "m1"},
		Messages: []*nanofleetv1.ChatMessage{
			{Role: "user", Content: "what is in notes.md? (" + id + ")", CreatedAt: ts(0)},
			{Role: "assistant", ToolCalls: []*nanofleetv1.ToolCall{{Id: id + "-c1", Name: "read_file", ArgumentsJson: `{"path":"notes.md"}`}}, CreatedAt: ts(500)},
			{Role: "tool", ToolCallId: id + "-c1", Name: "read_file", Content: "buy milk", CreatedAt: ts(750)},
			{Role: "assistant", Content: "It says: buy milk.", CreatedAt: ts(1400)},
		},
		Replies:     []*nanofleetv1.OutboundMessage{{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, Content: "It says: buy milk."}},
		CompletedAt: ts(1500),
	}
	data, err := proto.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.JS.Publish(ctxT(t), b.Space.History(rec.GetSessionKey()), data); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshot(t *testing.T) {
	b := bustest.StartJetStream(t, channels.Assets)
	fleet(t, b)
	srv := serve(t, b)
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodGet, srv.URL+"/dashboard/api/snapshot", nil)
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("snapshot: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var snap dashboard.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Problems) != 0 {
		t.Errorf("problems: %v", snap.Problems)
	}
	if snap.Workers != 2 || snap.ToolRunners != 1 || len(snap.Services) != 4 {
		t.Errorf("online: %d workers, %d tool runners, services %+v", snap.Workers, snap.ToolRunners, snap.Services)
	}
	if snap.TurnsInFlight != 1 || snap.Queued != 1 {
		t.Errorf("turns in flight %d, queued %d; want 1 and 1", snap.TurnsInFlight, snap.Queued)
	}
	var sawLag bool
	for _, s := range snap.Streams {
		for _, c := range s.Consumers {
			sawLag = sawLag || (s.Name == b.Space.InboundStream() && c.Name == "workers" && c.Pending == 1 && c.InFlight == 1)
		}
	}
	if len(snap.Streams) != 5 || !sawLag {
		t.Errorf("streams = %+v", snap.Streams)
	}
	if len(snap.Turns) != 3 || snap.Turns[0].TurnID != "t3" || snap.Turns[2].TurnID != "t1" {
		t.Fatalf("turns = %+v, want t3, t2, t1", snap.Turns)
	}
	tr := snap.Turns[0]
	if tr.DurationMS != 1500 || tr.Session != "web:c1" || tr.Reply != "It says: buy milk." || len(tr.Tools) != 1 {
		t.Errorf("turn = %+v", tr)
	}
	if c := tr.Tools[0]; c.Name != "read_file" || c.DurationMS != 250 || !c.Answered || c.Result != "buy milk" {
		t.Errorf("tool call = %+v", c)
	}
	if snap.DeadLetterCount != 1 || len(snap.DeadLetters) != 1 {
		t.Fatalf("dead letters = %d, %+v", snap.DeadLetterCount, snap.DeadLetters)
	}
	if d := snap.DeadLetters[0]; d.Source != "inbound" || d.Reason != "turn failed 3 times: worker crashed" || d.Deliveries != 4 {
		t.Errorf("dead letter = %+v", d)
	}
	u := snap.Usage
	wantTotal := fleetstatus.Tokens{Turns: 3, ModelCalls: 6, Prompt: 900, Completion: 90, Cached: 300, Reasoning: 9}
	if u.Total != wantTotal || len(u.Models) != 1 || u.Models[0].Key != "m1" || len(u.Users) != 1 || u.Users[0].Key != "web:u1" ||
		len(u.Sessions) != 1 || u.Sessions[0].Key != "web:c1" || u.Sessions[0].Prompt != 900 {
		t.Errorf("usage = %+v", u)
	}

	// A later snapshot reads only what is new and still lists the rest.
	publishTurn(t, b, "t4")
	d, err := dashboard.New(dashboard.Config{RecentTurns: 2}, dashboard.Deps{Bus: b, Gate: gate{}})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := d.Snapshot(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	publishTurn(t, b, "t5")
	s2, err := d.Snapshot(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(s1.Turns) != 2 || s1.Turns[0].TurnID != "t4" || len(s2.Turns) != 2 || s2.Turns[0].TurnID != "t5" || s2.Turns[1].TurnID != "t4" {
		t.Errorf("window of two: %+v then %+v", s1.Turns, s2.Turns)
	}
}

// TestChannels: the snapshot lists the channels the running gateways
// reported, merged (a failing gateway beside a connected one), and a
// channel waiting for its QR code to be scanned serves it as a PNG.
func TestChannels(t *testing.T) {
	b := bustest.StartJetStream(t, channels.Assets)
	srv := serve(t, b)
	ctx := ctxT(t)
	board, err := status.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	for _, id := range []string{"gw-a", "gw-b"} {
		fleetstatustest.Online(t, b, fleetstatus.GatewayService, map[string]string{fleetstatus.IDKey: id})
	}
	board.Reporter("gw-a").Serving(ctx, log, "web", "http://127.0.0.1:8080")
	board.Reporter("gw-b").Failing(ctx, log, "web", errors.New("listen: address in use"))
	get := func(path string) (int, string, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), body
	}
	if code, _, _ := get("/dashboard/api/qr/whatsapp"); code != http.StatusNotFound {
		t.Errorf("QR of a channel not linking: %d", code)
	}
	// gw-1 is not running (no discovery answer, no lease).
	if err := board.Reporter("gw-1").Update(ctx, "whatsapp", func(r *status.Record) {
		r.State, r.QR, r.Holder, r.Lease = status.Linking, "2@abc,def,ghi", "gw-1", "whatsapp-conn-x"
	}); err != nil {
		t.Fatal(err)
	}
	code, ctype, body := get("/dashboard/api/qr/whatsapp")
	if code != http.StatusOK || ctype != "image/png" || !bytes.HasPrefix(body, []byte("\x89PNG")) {
		t.Errorf("QR = %d %s %.20q", code, ctype, body)
	}
	_, _, body = get("/dashboard/api/snapshot")
	var snap dashboard.Snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		t.Fatal(err)
	}
	got := map[string]status.Channel{}
	for _, c := range snap.Channels {
		got[c.Channel] = c
	}
	// No gateway holds the WhatsApp lease: its holder is gone.
	if w := got["whatsapp"]; w.State != status.NotRunning || !strings.Contains(w.Reason, "gw-1") || w.QR != "" {
		t.Errorf("whatsapp = %+v", w)
	}
	w := got["web"]
	if w.State != status.Connected || w.Holder != "gw-a" || len(snap.Channels) != 2 {
		t.Errorf("channels = %+v", snap.Channels)
	}
	if len(w.Others) != 1 || w.Others[0].Gateway != "gw-b" || w.Others[0].State != status.Failed || w.Others[0].Reason != "listen: address in use" {
		t.Errorf("web's other gateways = %+v, want gw-b failing", w.Others)
	}
}

// TestLiveRefusesOtherOrigins: a page of another site, in a browser that
// holds the operator's login cookie, cannot open the live socket and
// read the fleet (cross-site WebSocket hijacking); the dashboard's own
// origin can.
func TestLiveRefusesOtherOrigins(t *testing.T) {
	srv := serve(t, bustest.StartJetStream(t, channels.Assets))
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/dashboard/api/live"
	tests := []struct {
		origin string
		ok     bool
	}{
		{"https://evil.example", false},
		{"http://" + strings.TrimPrefix(srv.URL, "http://") + ".evil.example", false},
		{"null", false},
		{srv.URL, true},
	}
	for _, tt := range tests {
		t.Run(tt.origin, func(t *testing.T) {
			h := http.Header{"Origin": {tt.origin}, "Cookie": {"login=ok"}}
			ws, resp, err := websocket.Dial(ctxT(t), u, &websocket.DialOptions{HTTPHeader: h})
			if (err == nil) != tt.ok {
				t.Fatalf("dial: %v (%v), want accepted %v", err, resp, tt.ok)
			}
			if ws == nil {
				return
			}
			defer ws.Close(websocket.StatusNormalClosure, "")
			if _, data, err := ws.Read(ctxT(t)); err != nil || !bytes.Contains(data, []byte(`"streams"`)) {
				t.Fatalf("first push %.80q, %v", data, err)
			}
		})
	}
}
