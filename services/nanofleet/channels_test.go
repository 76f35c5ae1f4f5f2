package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus/fleetstatustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	"github.com/nanofleet/nanofleet/pkg/syncbuf"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram/telegramtest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp/whatsapptest"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// TestChannelsLoginAndStatus runs the whole fleet (Telegram against its
// fake, the web chat and the API) and, on its NATS, a gateway with the
// WhatsApp channel against the fake WhatsApp: `channels login whatsapp`
// shows the QR code until it is scanned, a WhatsApp message is answered
// by the fleet's worker and fake model, and `channels status` lists every
// configured channel with its state, account and holder.
func TestChannelsLoginAndStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const token = "123456:STATUS-test"
	bot := telegramtest.New(t, token)
	llm := llmtest.NewServer(t)
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply { return llmtest.Text("Hello **there**") })
	port := freePort(t)
	chans := map[string]any{
		"telegram": map[string]any{"enabled": true, "token": token, "apiBase": bot.URL, "allowFrom": []string{"*"}},
	}
	doc := map[string]any{
		"nats":      map[string]any{"port": port},
		"agents":    map[string]any{"defaults": map[string]any{"model": "status-model"}},
		"providers": map[string]any{"custom": map[string]any{"apiKey": "k", "apiBase": llm.URL()}},
		"channels":  chans,
	}
	file := config.Defaults()
	data, _ := json.Marshal(doc)
	if err := config.Parse(file, data, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	f, url := startListening(ctx, t, file, fleet.Options{Gateway: true, GatewayListen: listen})
	defer f.Stop()
	// The fleet's gateway announces the channels it runs.
	bustest.Eventually(t, 30*time.Second, func() error {
		svcs, err := fleetstatus.Discover(ctx, f.Bus.NC, 200*time.Millisecond)
		if err != nil {
			return err
		}
		var announced []string
		for _, s := range svcs {
			if names, ok := s.Channels(); ok && s.Name == fleetstatus.GatewayService {
				announced = append(announced, names...)
			}
		}
		if strings.Join(announced, ",") != "telegram,web,api" {
			return fmt.Errorf("the fleet's gateway announces %q, want telegram, web, api", announced)
		}
		return nil
	})

	// The operator's config names WhatsApp too; its gateway is this
	// test's, dialling the fake.
	env, _, _ := testEnv(t, nil)
	out := &syncbuf.Buffer{}
	env.stdout = out
	chans["whatsapp"] = map[string]any{"enabled": true, "allowFrom": []string{"*"}}
	data, _ = json.Marshal(doc)
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := bus.Connect(ctx, bus.Config{URL: url, Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	phone := whatsapptest.New()
	gctx, gcancel := context.WithCancel(ctx)
	log := slog.New(slog.DiscardHandler)
	gate, err := access.Open(gctx, b, access.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	var wcfg whatsapp.Config
	wcfg.Enabled, wcfg.AllowFrom = true, []string{"*"}
	board, err := status.Open(gctx, b)
	if err != nil {
		t.Fatal(err)
	}
	// Reported as the gateway announced below, as channelgateway does.
	rep := board.Reporter("whatsapp-gateway")
	wa, err := whatsapp.New(gctx, wcfg, whatsapp.Deps{Bus: b, Gate: gate, Status: rep}, whatsapp.WithLogger(log), whatsapp.WithDialer(phone.Dial))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.DefaultConfig(), b, []gateway.Adapter{wa}, gateway.WithLogger(log), gateway.WithStatus(rep))
	if err != nil {
		t.Fatal(err)
	}
	// Announced as channelgateway announces a gateway: login waits for
	// the gateway that runs WhatsApp.
	unregister, err := fleetstatus.Register(t.Context(), b.NC, fleetstatus.GatewayService, "whatsapp-gateway", fleetstatus.WithChannels([]string{"whatsapp"}))
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	stopGateway := svctest.Run(t, g.Run, svctest.StopWithin(10*time.Second))
	defer func() { gcancel(); _ = stopGateway() }()

	login := make(chan error, 1)
	go func() {
		login <- dispatch(ctx, env, []string{"channels", "--config", cfgPath, "--nats", url, "login", "whatsapp"})
	}()
	// Scanned once the terminal shows the code, as a person would.
	bustest.Eventually(t, 30*time.Second, func() error {
		if !strings.Contains(out.String(), "Scan this code") {
			return errors.New("no QR code printed yet")
		}
		return nil
	})
	phone.Scan(t, 30*time.Second)
	select {
	case err := <-login:
		if err != nil {
			t.Fatalf("login: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("login did not end after the scan:\n%s", out.String())
	}
	if s := out.String(); !strings.Contains(s, "Scan this code") || !strings.Contains(s, "█") || !strings.Contains(s, "WhatsApp linked as +"+whatsapptest.Phone) {
		t.Errorf("login printed:\n%s", s)
	}

	phone.Emit(whatsapptest.DM("3EB0FLEET", "15550001", "hello fleet"))
	if s := phone.Next(t, 30*time.Second); s.Text() != "Hello *there*" || s.To.User != "15550001" {
		t.Errorf("WhatsApp answer = %q to %s", s.Text(), s.To)
	}
	if reqs := llm.Requests(); len(reqs) == 0 || !strings.Contains(reqs[0].LastUserText(), "hello fleet") {
		t.Errorf("model requests = %d", len(reqs))
	}

	out = &syncbuf.Buffer{}
	env.stdout = out
	if err := dispatch(ctx, env, []string{"channels", "--config", cfgPath, "--nats", url, "status"}); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if f := strings.Fields(line); len(f) >= 4 {
			rows[f[0]] = f[1:]
		}
	}
	for _, want := range []struct{ channel, state, account string }{
		{"telegram", "connected", "@nano_bot"},
		{"whatsapp", "connected", "+" + whatsapptest.Phone},
		{"web", "connected", "http://" + listen},
		{"api", "connected", "http://" + listen + "/v1"},
	} {
		r := rows[want.channel]
		if len(r) < 3 || r[0] != want.state || r[1] != want.account || r[2] == "-" {
			t.Errorf("%s row = %q, want %s as %s with a holder\n%s", want.channel, r, want.state, want.account, out.String())
		}
	}
	if !strings.Contains(out.String(), "whatsapp  connected") || strings.Contains(out.String(), "QR code") {
		t.Errorf("a linked WhatsApp still reports linking:\n%s", out.String())
	}
	if len(rows) != 5 { // the header and four channels
		t.Errorf("status listed %d rows:\n%s", len(rows), out.String())
	}
}

// TestChannelsStatusWithSeveralGateways: `channels status` shows a
// channel connected on one running gateway as connected, held by it, with
// a row under it for another running gateway whose start is retried, and
// a channel only a gone gateway reported as not running, with its last
// word. Once the connected gateway stops, the channel shows the other's
// failure alone.
func TestChannelsStatusWithSeveralGateways(t *testing.T) {
	srv := bustest.StartServer(t)
	b := srv.Connect(t, "", status.Assets)
	ctx := t.Context()
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	cfg := `{"channels": {"telegram": {"enabled": true, "token": "1:x"}, "slack": {"enabled": true, "botToken": "xoxb-1", "appToken": "xapp-1"}}}`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	board, err := status.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	stopA, err := fleetstatus.Register(t.Context(), b.NC, fleetstatus.GatewayService, "gw-a", fleetstatus.WithChannels([]string{"slack"}))
	if err != nil {
		t.Fatal(err)
	}
	stopB, err := fleetstatus.Register(t.Context(), b.NC, fleetstatus.GatewayService, "gw-b", fleetstatus.WithChannels([]string{"slack"}))
	if err != nil {
		t.Fatal(err)
	}
	defer stopB()
	a := board.Reporter("gw-a")
	a.Serving(ctx, log, "slack", "@nano")
	board.Reporter("gw-b").Retrying(ctx, log, "slack", errors.New("slack auth.test failed, retrying: 502 Bad Gateway"))
	board.Reporter("gw-gone").Serving(ctx, log, "telegram", "@bot")

	status := func() []string {
		t.Helper()
		env, out, _ := testEnv(t, nil)
		if err := dispatch(ctx, env, []string{"channels", "status", "--config", cfgPath, "--nats", srv.ClientURL()}); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	}
	// the cells of a row, without SINCE, one space apart
	since := regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`)
	fields := func(line string) string { return strings.Join(strings.Fields(since.ReplaceAllString(line, "")), " ") }
	lines := status()
	want := []string{
		"telegram not running @bot - its gateway gw-gone no longer runs; it last reported connected",
		"slack connected @nano gw-a",
		"failed - gw-b slack auth.test failed, retrying: 502 Bad Gateway",
	}
	if len(lines) != 6 { // the header, telegram, slack and gw-b's row, web, api
		t.Fatalf("channels status printed:\n%s", strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if got := fields(lines[i+1]); got != w {
			t.Errorf("row %d = %q, want %q\n%s", i+1, got, w, strings.Join(lines, "\n"))
		}
	}
	if !strings.HasPrefix(lines[3], " ") {
		t.Errorf("gw-b's row is not indented under slack:\n%s", strings.Join(lines, "\n"))
	}

	// gw-a stops: unannounced, its records withdrawn.
	stopA()
	if err := a.Withdraw(ctx); err != nil {
		t.Fatal(err)
	}
	lines = status()
	if len(lines) != 5 || fields(lines[2]) != "slack failed - gw-b slack auth.test failed, retrying: 502 Bad Gateway" {
		t.Errorf("once gw-a stopped, channels status printed:\n%s", strings.Join(lines, "\n"))
	}
}

// TestChannelsLoginWhatsApp: `channels login whatsapp` says at once that
// the running fleet does not run WhatsApp (it waited out its whole
// timeout), and waits only while no gateway runs or one runs WhatsApp.
func TestChannelsLoginWhatsApp(t *testing.T) {
	tests := []struct {
		name     string
		gateways [][]string // the channels each gateway online announces; nil: one that announces none
		err      error
		out      string
	}{
		{"no gateway yet", nil, errNotLinked, "none runs yet"},
		{"whatsapp not enabled", [][]string{{"telegram", "web", "api"}}, errNotEnabled, ""},
		{"a gateway runs it", [][]string{{"web"}, {"whatsapp"}}, errNotLinked, "waiting for the gateway running channels.whatsapp"},
		{"a gateway that does not say", [][]string{{"web"}, nil}, errNotLinked, "waiting for the gateway running channels.whatsapp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := bustest.StartServer(t)
			b := srv.Connect(t, "", status.Assets)
			for i, chans := range tt.gateways {
				id := fmt.Sprintf("gw-%d", i)
				if chans == nil {
					fleetstatustest.Online(t, b, fleetstatus.GatewayService, map[string]string{"id": id})
					continue
				}
				stop, err := fleetstatus.Register(t.Context(), b.NC, fleetstatus.GatewayService, id, fleetstatus.WithChannels(chans))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(stop)
			}
			env, out, _ := testEnv(t, nil)
			err := dispatch(t.Context(), env, []string{"channels", "login", "whatsapp", "--timeout", "10ms", "--nats", srv.ClientURL()})
			if !errors.Is(err, tt.err) {
				t.Fatalf("login: %v, want %v", err, tt.err)
			}
			if !strings.Contains(out.String(), tt.out) {
				t.Errorf("login printed %q, want %q", out.String(), tt.out)
			}
			if tt.err == errNotEnabled {
				for _, want := range []string{"channels.whatsapp is not enabled in the running fleet's config (its gateway runs api, telegram, web)", "set channels.whatsapp.enabled"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
			}
		})
	}
}
