package channels_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/config/configtest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram/telegramtest"
)

func parse(t *testing.T, doc string) (channels.Config, error) {
	t.Helper()
	f := config.Defaults()
	if err := config.Parse(f, []byte(doc), func(string) string { return "" }); err != nil {
		return channels.Config{}, err
	}
	return channels.FromFile(f)
}

// TestNanobotChannelDefaults: the sections nanobot 0.3.0 writes for its
// channels at their defaults (testdata, made with each channel's own
// Config of nanobot's source) load, one at a time and all together: the
// keys nanofleet does not take hold nanobot's defaults, which nobody set.
// They failed on 24 keys.
func TestNanobotChannelDefaults(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "nanobot-0.3.0-channels.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Channels map[string]json.RawMessage `json:"channels"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Channels) != 6 {
		t.Fatalf("testdata has %d channels, want telegram, slack, discord, feishu, dingtalk and whatsapp", len(doc.Channels))
	}
	for name, section := range doc.Channels {
		t.Run(name, func(t *testing.T) {
			if _, err := parse(t, `{"channels": {"`+name+`": `+string(section)+`}}`); err != nil {
				t.Errorf("nanobot's default %s section: %v", name, err)
			}
		})
	}
	if _, err := parse(t, string(data)); err != nil {
		t.Errorf("all of them: %v", err)
	}
}

func TestNanobotKeys(t *testing.T) {
	c, err := parse(t, `{"channels": {
		"sendProgress": false, "sendToolHints": true,
		"telegram": {"enabled": true, "token": "1:abc", "allowFrom": ["@me", "42"], "groupPolicy": "open",
		             "streaming": true, "sendProgress": true, "replyToMessage": false, "proxy": "socks5://127.0.0.1:1080"},
		"slack": {"enabled": true, "mode": "socket", "botToken": "xoxb-1", "appToken": "xapp-1", "replyInThread": true,
		          "reactEmoji": "eyes", "groupPolicy": "mention", "dm": {"enabled": true, "policy": "open", "allowFrom": ["U1"]}},
		"web": {"enabled": true, "listen": ":8081", "token": "long-enough"},
		"api": {"enabled": false},
		"discord": {"enabled": true, "token": "x", "gatewayUrl": "wss://gateway.discord.gg/?v=10&encoding=json", "intents": 37377,
		            "allowFrom": ["123"], "groupPolicy": "allowlist", "groupAllowFrom": ["456"], "streaming": true,
		            "streamEditInterval": 1.5, "sendProgress": false, "sendToolHints": true},
		"feishu": {"enabled": true, "appId": "cli_1", "appSecret": "s", "encryptKey": "k", "verificationToken": "v",
		           "allowFrom": ["ou_1"], "groupPolicy": "mention", "streaming": false, "sendProgress": true, "sendToolHints": false,
		           "domain": "lark"},
		"dingtalk": {"enabled": true, "clientId": "ding1", "clientSecret": "s", "allowFrom": ["staff1"], "groupPolicy": "open",
		             "streaming": false, "sendProgress": false}
	}}`)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Telegram.Enabled || c.Telegram.GroupPolicy != "open" || len(c.Telegram.AllowFrom) != 2 || *c.SendProgress {
		t.Errorf("telegram section = %+v", c.Telegram)
	}
	if !c.Feishu.Enabled || c.Feishu.AppID != "cli_1" || c.Feishu.Domain != "lark" || len(c.Feishu.AllowFrom) != 1 {
		t.Errorf("feishu section = %+v", c.Feishu)
	}
	if !c.DingTalk.Enabled || c.DingTalk.ClientID != "ding1" || c.DingTalk.GroupPolicy != "open" {
		t.Errorf("dingtalk section = %+v", c.DingTalk)
	}
	if d := c.Discord; !d.Enabled || d.GroupPolicy != "allowlist" || d.GroupAllowFrom[0] != "456" || !d.Streaming || d.StreamEditInterval != 1.5 {
		t.Errorf("discord section = %+v", d)
	}
	if c.Slack.DM.Policy != "open" || c.Web.Listen != ":8081" || c.API.Enabled {
		t.Errorf("config = %+v", c)
	}
}

func TestDefaults(t *testing.T) {
	c, err := parse(t, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Web.Enabled || !c.API.Enabled || c.Telegram.Enabled || c.Slack.Enabled {
		t.Errorf("defaults = %+v", c)
	}
}

func TestInvalidKeysAreNamed(t *testing.T) {
	tests := []struct{ doc, key string }{
		{`{"channels": {"telegram": {"enabled": true}}}`, "channels.telegram.token"},
		{`{"channels": {"telegram": {"enabled": true, "token": "1:a", "groupPolicy": "some"}}}`, "channels.telegram.groupPolicy"},
		{`{"channels": {"telegram": {"enabled": true, "token": "1:a", "webhook": {"url": "https://x/y"}}}}`, "channels.telegram.webhook.secret"},
		{`{"channels": {"telegram": {"tokn": "1:a"}}}`, "channels.telegram.tokn"},
		{`{"channels": {"slack": {"enabled": true, "botToken": "xoxb-1"}}}`, "channels.slack.appToken"},
		{`{"channels": {"web": {"listen": "8080"}}}`, "channels.web.listen"},
		{`{"channels": {"web": {"listen": "localhost:http"}}}`, "channels.web.listen"},
		{`{"channels": {"web": {"listen": ":70000"}}}`, "channels.web.listen"},
		{`{"channels": {"api": {"token": "short"}}}`, "channels.api.token"},
		{`{"channels": {"feishu": {"enabled": true, "appId": "cli_1"}}}`, "channels.feishu.appSecret"},
		{`{"channels": {"feishu": {"appSecrt": "s"}}}`, "channels.feishu.appSecrt"},
		{`{"channels": {"feishu": {"enabled": true, "appId": "cli_1", "appSecret": "s", "streamEditInterval": 99}}}`, "channels.feishu.streamEditInterval"},
		{`{"channels": {"dingtalk": {"enabled": true, "clientSecret": "s"}}}`, "channels.dingtalk.clientId"},
		{`{"channels": {"discord": {"enabled": true}}}`, "channels.discord.token"},
		{`{"channels": {"discord": {"enabled": true, "token": "t", "groupPolicy": "allowlist"}}}`, "channels.discord.groupAllowFrom"},
		{`{"channels": {"discord": {"enabled": true, "token": "t", "streamEditInterval": -1}}}`, "channels.discord.streamEditInterval"},
		{`{"channels": {"discord": {"enabled": true, "token": "t", "apiBase": "localhost"}}}`, "channels.discord.apiBase"},
		{`{"channels": {"discord": {"tokn": "t"}}}`, "channels.discord.tokn"},
		{`{"channels": {"whatsapp": {"enabled": true, "groupPolicy": "all"}}}`, "channels.whatsapp.groupPolicy"},
		{`{"channels": {"whatsapp": {"enabled": true, "account": "a b"}}}`, "channels.whatsapp.account"},
		{`{"channels": {"whatsapp": {"alowFrom": ["1"]}}}`, "channels.whatsapp.alowFrom"},
		{`{"channels": {"email": {"enabled": true}}}`, "channels.email.enabled"},
		{`{"channels": {"sendProgress": "yes"}}`, "channels.sendProgress"},
		// Keys are case-sensitive, the channels' names too.
		{`{"channels": {"Telegram": {"enabled": false}}}`, "channels.Telegram: unknown key; keys are case-sensitive: did you mean telegram?"},
		{`{"channels": {"telegram": {"Token": "1:a"}}}`, "channels.telegram.Token: unknown key; keys are case-sensitive: did you mean token?"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			_, err := parse(t, tt.doc)
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.key) {
				t.Errorf("error = %v, want one naming %s", err, tt.key)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	b := bustest.StartJetStream(t, channels.Assets)
	fake := telegramtest.New(t, "1:abc")
	ctx := t.Context()
	cfg := channels.Defaults()
	cfg.Telegram.Enabled, cfg.Telegram.Token, cfg.Telegram.APIBase = true, "1:abc", fake.URL
	cfg.Telegram.AllowFrom = []string{"*"}
	cfg.Telegram.Webhook.URL, cfg.Telegram.Webhook.Secret = "https://example.com/hooks/telegram", "0123456789abcdef"
	deps := channels.Deps{Bus: b, Listen: ":8080"}
	adapters, handler, err := channels.Build(ctx, cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if len(adapters) != 1 || adapters[0].Channel() != "telegram" || handler == nil {
		t.Fatalf("Build = %d adapters, handler %v", len(adapters), handler)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()

	// The generated API key is kept in the fleet: a second gateway gets
	// the same one.
	kv, err := b.JS.KeyValue(ctx, b.Space.Bucket("gateway"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := kv.Get(ctx, "api-token")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := channels.Build(ctx, cfg, deps); err != nil {
		t.Fatal(err)
	}
	if again, _ := kv.Get(ctx, "api-token"); string(again.Value()) != string(key.Value()) {
		t.Error("the second gateway generated another API key")
	}

	get := func(path, auth string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/v1/models", string(key.Value())); code != 200 || !strings.Contains(body, "nanofleet") {
		t.Errorf("/v1/models: %d %s", code, body)
	}
	if code, body := get("/", ""); code != 200 || !strings.Contains(body, `name="token"`) {
		t.Errorf("/: %d", code)
	}
	resp, err := http.Post(srv.URL+"/hooks/telegram", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("webhook without the secret: %d, want 401", resp.StatusCode)
	}
}

// TestBuildFeishuAndDingTalk: both adapters are built from their
// sections, and Feishu's webhook mode is served on the gateway's
// listener, refusing unsigned requests.
func TestBuildFeishuAndDingTalk(t *testing.T) {
	b := bustest.StartJetStream(t, channels.Assets)
	cfg := channels.Defaults()
	cfg.Web.Enabled, cfg.API.Enabled = false, false
	cfg.Feishu = feishu.Config{Common: channelconfig.Common{Enabled: true}, AppID: "cli_1", AppSecret: "s", Mode: feishu.ModeWebhook, EncryptKey: "k", VerificationToken: "v", Webhook: feishu.Webhook{Path: "/hooks/lark"}}
	cfg.DingTalk = dingtalk.Config{Common: channelconfig.Common{Enabled: true}, ClientID: "ding1", ClientSecret: "s"}
	adapters, handler, err := channels.Build(t.Context(), cfg, channels.Deps{Bus: b, Listen: ":8080"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range adapters {
		names = append(names, a.Channel())
	}
	if strings.Join(names, ",") != "feishu,dingtalk" || handler == nil {
		t.Fatalf("Build = %v, handler %v", names, handler)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/hooks/lark", "application/json", strings.NewReader(`{"encrypt":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Not running yet (no gateway started the adapter): refused either way.
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNotFound {
		t.Errorf("unsigned Feishu webhook request: %d", resp.StatusCode)
	}
}

// TestNanobotSnakeCase: nanobot takes snake_case keys as their camelCase
// form; a pasted section using them loads the same, as do keys nanofleet
// does not take when unset ("", null).
func TestNanobotSnakeCase(t *testing.T) {
	c, err := parse(t, `{"channels": {
		"send_progress": false, "send_tool_hints": true, "extract_document_text": true,
		"telegram": {"enabled": true, "token": "1:abc", "allow_from": ["42"], "group_policy": "open", "reply_to_message": false,
		             "webhookUrl": "", "webhook_secret_token": ""},
		"slack": {"enabled": true, "bot_token": "xoxb-1", "app_token": "xapp-1", "reply_in_thread": false,
		          "group_allow_from": ["C1"], "group_policy": "allowlist", "dm": {"policy": "allowlist", "allow_from": ["U2"]}},
		"discord": {"enabled": true, "token": "t", "allow_from": ["1"], "allowChannels": [], "stream_edit_interval": 2, "proxy": null},
		"feishu": {"enabled": true, "app_id": "cli_1", "app_secret": "s", "encrypt_key": "k", "verification_token": "v"},
		"dingtalk": {"enabled": true, "client_id": "ding1", "client_secret": "s", "groupUserIsolation": false},
		"whatsapp": {"enabled": true, "allow_from": ["1234"], "group_policy": "disabled"},
		"weixin": {"enabled": false}, "msteams": {"enabled": false}, "websocket": {"enabled": false}
	}}`)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case c.SendProgress == nil || *c.SendProgress || c.SendToolHints == nil || !*c.SendToolHints:
		t.Errorf("channels-wide keys: %v %v", c.SendProgress, c.SendToolHints)
	case c.Telegram.AllowFrom[0] != "42" || c.Telegram.GroupPolicy != "open" || c.Telegram.ReplyToMessage == nil || *c.Telegram.ReplyToMessage:
		t.Errorf("telegram = %+v", c.Telegram)
	case c.Slack.BotToken != "xoxb-1" || c.Slack.AppToken != "xapp-1" || *c.Slack.ReplyInThread || c.Slack.GroupAllowFrom[0] != "C1" || c.Slack.DM.AllowFrom[0] != "U2":
		t.Errorf("slack = %+v", c.Slack)
	case c.Discord.AllowFrom[0] != "1" || c.Discord.StreamEditInterval != 2:
		t.Errorf("discord = %+v", c.Discord)
	case c.Feishu.AppID != "cli_1" || c.Feishu.EncryptKey != "k" || c.Feishu.VerificationToken != "v":
		t.Errorf("feishu = %+v", c.Feishu)
	case c.DingTalk.ClientID != "ding1" || c.DingTalk.ClientSecret != "s":
		t.Errorf("dingtalk = %+v", c.DingTalk)
	case c.WhatsApp.AllowFrom[0] != "1234" || c.WhatsApp.GroupPolicy != "disabled":
		t.Errorf("whatsapp = %+v", c.WhatsApp)
	}
}

// TestNanobotKeysRefused: a key nanobot documents and nanofleet does not
// take fails at start naming its whole path and what to use instead, in
// either case style.
func TestNanobotKeysRefused(t *testing.T) {
	tests := []struct{ doc, key, says string }{
		{`{"channels": {"telegram": {"mode": "webhook", "webhookUrl": "https://x/t"}}}`, "channels.telegram.mode", "webhook.url"},
		{`{"channels": {"telegram": {"webhookUrl": "https://x/t"}}}`, "channels.telegram.webhookUrl", "use webhook.url"},
		{`{"channels": {"telegram": {"webhook_secret_token": "s"}}}`, "channels.telegram.webhook_secret_token", "use webhook.secret"},
		{`{"channels": {"telegram": {"webhookListenPort": 8443}}}`, "channels.telegram.webhookListenPort", "channels.web.listen"},
		{`{"channels": {"telegram": {"reactEmoji": "x"}}}`, "channels.telegram.reactEmoji", "remove the key"},
		{`{"channels": {"telegram": {"showReasoning": true}}}`, "channels.telegram.showReasoning", "reasoning"},
		{`{"channels": {"telegram": {"allowFrom": ["1"], "allow_from": ["2"]}}}`, "channels.telegram.allow_from", "keep one"},
		{`{"channels": {"slack": {"doneEmoji": "x"}}}`, "channels.slack.doneEmoji", "remove the key"},
		{`{"channels": {"slack": {"webhookPath": "/hooks/slack"}}}`, "channels.slack.webhookPath", "Socket Mode"},
		{`{"channels": {"slack": {"userTokenReadOnly": false}}}`, "channels.slack.userTokenReadOnly", "remove the key"},
		{`{"channels": {"slack": {"groupRequireMention": true}}}`, "channels.slack.groupRequireMention", "allowlist"},
		{`{"channels": {"discord": {"enabled": true, "token": "t", "allowChannels": ["1"]}}}`, "channels.discord.allowChannels", "groupAllowFrom"},
		{`{"channels": {"discord": {"proxy": "http://p:1"}}}`, "channels.discord.proxy", "remove the key"},
		{`{"channels": {"discord": {"working_emoji": "x"}}}`, "channels.discord.working_emoji", "remove the key"},
		{`{"channels": {"feishu": {"reactEmoji": "OnIt"}}}`, "channels.feishu.reactEmoji", "remove the key"},
		{`{"channels": {"feishu": {"toolHintPrefix": "x"}}}`, "channels.feishu.toolHintPrefix", "remove the key"},
		{`{"channels": {"dingtalk": {"enabled": true, "clientId": "c", "clientSecret": "s", "groupUserIsolation": true}}}`, "channels.dingtalk.groupUserIsolation", "one session per group"},
		{`{"channels": {"dingtalk": {"disablePrivateChat": true}}}`, "channels.dingtalk.disablePrivateChat", "dmPolicy"},
		{`{"channels": {"whatsapp": {"databasePath": "~/x.db"}}}`, "channels.whatsapp.databasePath", "channels login whatsapp"},
		{`{"channels": {"whatsapp": {"lidMappings": {"1": "2"}}}}`, "channels.whatsapp.lidMappings", "allowFrom"},
		{`{"channels": {"weixin": {"enabled": true}}}`, "channels.weixin.enabled", "no weixin channel"},
		{`{"channels": {"signal": {"enabled": true}}}`, "channels.signal.enabled", "no signal channel"},
		{`{"channels": {"websocket": {"enabled": true}}}`, "channels.websocket.enabled", "channels.web"},
		{`{"channels": {"showReasoning": false}}`, "channels.showReasoning", "reasoning"},
		{`{"channels": {"send_max_retries": 5}}`, "channels.send_max_retries", "remove the key"},
		{`{"channels": {"sendProgress": true, "send_progress": false}}`, "channels.send_progress", "keep one"},
		{`{"channels": {"telegrm": {}}}`, "channels.telegrm", "check spelling"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			_, err := parse(t, tt.doc)
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Key != tt.key || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error = %v, want one naming %s and saying %q", err, tt.key, tt.says)
			}
		})
	}
}

// TestEveryChannelsProblemAtOnce: the channels section names every
// unknown key and bad value of every channel in one error, a line each
// (it named the first, and a typo hid the rest).
func TestEveryChannelsProblemAtOnce(t *testing.T) {
	_, err := parse(t, `{"channels": {
		"Telegram": {},
		"telegram": {"enabled": true, "token": "nocolon", "groupPolicy": "some"},
		"feishu": {"appSecrt": "s"},
		"slack": {"enabled": true, "botToken": "xoxb-1"},
		"web": {"listen": "8080", "token": "short"},
		"email": {"enabled": true}
	}}`)
	want := []string{
		"channels.Telegram: unknown key; keys are case-sensitive: did you mean telegram?",
		"channels.feishu.appSecrt: unknown key",
		"channels.telegram.token: does not look like a bot token",
		"channels.telegram.groupPolicy: must be mention, open",
		"channels.slack.appToken: required",
		`channels.web.listen: want host:port ("127.0.0.1:8080", ":8080"), got "8080"`,
		"channels.web.token: too short",
		"channels.email.enabled: nanofleet has no email channel",
	}
	configtest.WantProblems(t, err, want...)
}
