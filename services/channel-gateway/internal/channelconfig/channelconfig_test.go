package channelconfig_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
)

func TestValidateNamesTheKeyPath(t *testing.T) {
	withGroups := channelconfig.Rules{Name: "chat", GroupIDs: "room ids"}
	noGroups := channelconfig.Rules{Name: "chat"}
	tests := []struct {
		name    string
		c       channelconfig.Common
		rules   channelconfig.Rules
		wantKey string // "" means valid
	}{
		{"disabled is not checked", channelconfig.Common{GroupPolicy: "bogus"}, withGroups, ""},
		{"defaults", channelconfig.Common{Enabled: true}, withGroups, ""},
		{"allowlist with groups", channelconfig.Common{Enabled: true, GroupPolicy: "allowlist", GroupAllowFrom: []string{"r1"}}, withGroups, ""},
		{"unknown group policy", channelconfig.Common{Enabled: true, GroupPolicy: "all"}, withGroups, "channels.chat.groupPolicy"},
		{"allowlist where unsupported", channelconfig.Common{Enabled: true, GroupPolicy: "allowlist"}, noGroups, "channels.chat.groupPolicy"},
		{"group list where unsupported", channelconfig.Common{Enabled: true, GroupAllowFrom: []string{"r1"}}, noGroups, "channels.chat.groupAllowFrom"},
		{"allowlist without groups", channelconfig.Common{Enabled: true, GroupPolicy: "allowlist"}, withGroups, "channels.chat.groupAllowFrom"},
		{"dm policy", channelconfig.Common{Enabled: true, DMPolicy: "maybe"}, withGroups, "channels.chat.dmPolicy"},
		{"negative edit interval", channelconfig.Common{Enabled: true, StreamEditInterval: -1}, withGroups, "channels.chat.streamEditInterval"},
		{"long edit interval", channelconfig.Common{Enabled: true, StreamEditInterval: 61}, withGroups, "channels.chat.streamEditInterval"},
		{"negative media limit", channelconfig.Common{Enabled: true, MaxMediaBytes: -1}, withGroups, "channels.chat.maxMediaBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate(tt.rules)
			if tt.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.wantKey+":") {
				t.Fatalf("Validate = %v, want config.ErrInvalid naming %s", err, tt.wantKey)
			}
		})
	}
}

func TestCheckURLs(t *testing.T) {
	tests := []struct {
		urls    map[string]string
		wantKey string
	}{
		{map[string]string{"apiBase": "", "proxy": "socks5://127.0.0.1:1080"}, ""},
		{map[string]string{"apiBase": "https://example.com", "proxy": "not a url"}, "channels.chat.proxy"},
		{map[string]string{"apiBase": "/relative", "proxy": "also bad"}, "channels.chat.apiBase"},
	}
	for _, tt := range tests {
		err := channelconfig.CheckURLs("chat", tt.urls)
		if tt.wantKey == "" {
			if err != nil {
				t.Errorf("CheckURLs(%v) = %v, want nil", tt.urls, err)
			}
			continue
		}
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.wantKey+":") {
			t.Errorf("CheckURLs(%v) = %v, want config.ErrInvalid naming %s", tt.urls, err, tt.wantKey)
		}
	}
}

func TestRequired(t *testing.T) {
	tests := []struct {
		keys     map[string]string
		wantKeys []string
	}{
		{map[string]string{"appId": "cli_1", "appSecret": "s"}, nil},
		{map[string]string{"appSecret": " ", "appId": "cli_1"}, []string{"channels.chat.appSecret"}},
		{map[string]string{"appSecret": "", "appId": ""}, []string{"channels.chat.appId", "channels.chat.appSecret"}},
	}
	for _, tt := range tests {
		err := channelconfig.Required("chat", tt.keys)
		if got := invalidKeys(err); !slices.Equal(got, tt.wantKeys) {
			t.Errorf("Required(%v) = %v, want errors naming %v", tt.keys, err, tt.wantKeys)
		}
	}
}

// invalidKeys are the keys of the *config.Error values joined in err, in
// order.
func invalidKeys(err error) []string {
	if e, ok := err.(*config.Error); ok {
		return []string{e.Key}
	}
	var keys []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, err := range j.Unwrap() {
			keys = append(keys, invalidKeys(err)...)
		}
	}
	return keys
}

func TestDefaults(t *testing.T) {
	var c channelconfig.Common
	if got := c.EditInterval(1200 * time.Millisecond); got != 1200*time.Millisecond {
		t.Errorf("EditInterval unset = %v, want the default", got)
	}
	if got := c.MediaLimit(20 << 20); got != 20<<20 {
		t.Errorf("MediaLimit unset = %d, want the default", got)
	}
	no := false
	c = channelconfig.Common{StreamEditInterval: 0.5, MaxMediaBytes: 1000, SendProgress: &no}
	if got := c.EditInterval(time.Second); got != 500*time.Millisecond {
		t.Errorf("EditInterval = %v, want 500ms", got)
	}
	if got := c.MediaLimit(20 << 20); got != 1000 {
		t.Errorf("MediaLimit = %d, want 1000", got)
	}
	if c.Progress(true) || c.ToolHints(false) || !c.ToolHints(true) {
		t.Errorf("Progress/ToolHints: a set key wins, an unset one follows the channels-wide default")
	}
}

// TestShowsLive covers ShowsLive and LiveText, which follows it.
func TestShowsLive(t *testing.T) {
	yes, no := true, false
	const (
		progress = nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS
		hint     = nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT
		final    = nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL
	)
	tests := []struct {
		name            string
		c               channelconfig.Common
		kind            nanofleetv1.OutboundKind
		progress, hints bool // channels-wide defaults
		want            bool
	}{
		{"progress by default", channelconfig.Common{}, progress, true, false, true},
		{"progress off channels-wide", channelconfig.Common{}, progress, false, false, false},
		{"progress off for the channel", channelconfig.Common{SendProgress: &no}, progress, true, true, false},
		{"hints off by default", channelconfig.Common{}, hint, true, false, false},
		{"hints on for the channel", channelconfig.Common{SendToolHints: &yes}, hint, true, false, true},
		{"a final answer is not live", channelconfig.Common{}, final, true, true, false},
		{"a delta is not shown as a message", channelconfig.Common{}, nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, true, true, false},
	}
	// LiveText shows what ShowsLive shows, each kind its own way.
	asProgress := func(s string) string { return "_" + s + "_" }
	asHint := func(s string) string { return "`" + s + "`" }
	wantText := map[nanofleetv1.OutboundKind]string{progress: "_text_", hint: "`text`"}
	for _, tt := range tests {
		if got := tt.c.ShowsLive(tt.kind, tt.progress, tt.hints); got != tt.want {
			t.Errorf("%s: ShowsLive = %v, want %v", tt.name, got, tt.want)
		}
		msg := &nanofleetv1.OutboundMessage{Kind: tt.kind, Content: "text"}
		text, ok := tt.c.LiveText(msg, tt.progress, tt.hints, asProgress, asHint)
		if want := wantText[tt.kind]; ok != tt.want || ok && text != want {
			t.Errorf("%s: LiveText = %q, %v; want %q, %v", tt.name, text, ok, want, tt.want)
		}
	}
}

func TestGroupDisabledWhereAllowed(t *testing.T) {
	c := channelconfig.Common{Enabled: true, GroupPolicy: channelconfig.GroupDisabled}
	if err := c.Validate(channelconfig.Rules{Name: "chat", GroupDisabled: true}); err != nil {
		t.Errorf("disabled where allowed: %v", err)
	}
	if err := c.Validate(channelconfig.Rules{Name: "chat"}); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "channels.chat.groupPolicy:") {
		t.Errorf("disabled where not allowed: %v, want config.ErrInvalid naming channels.chat.groupPolicy", err)
	}
}

func TestAdmitsGroup(t *testing.T) {
	listed := []string{"g1", "srv1"}
	tests := []struct {
		name      string
		policy    string
		mentioned bool
		chats     []string
		want      bool
	}{
		{"mention by default, mentioned", "", true, []string{"g9"}, true},
		{"mention by default, not mentioned", "", false, []string{"g1"}, false},
		{"mention, mentioned", channelconfig.GroupMention, true, nil, true},
		{"mention, not mentioned", channelconfig.GroupMention, false, []string{"g1"}, false},
		{"open without mention", channelconfig.GroupOpen, false, []string{"g9"}, true},
		{"disabled even when mentioned", channelconfig.GroupDisabled, true, []string{"g1"}, false},
		{"allowlist, chat listed", channelconfig.GroupAllowlist, false, []string{"g1"}, true},
		{"allowlist, its server listed", channelconfig.GroupAllowlist, false, []string{"c5", "srv1"}, true},
		{"allowlist, not listed though mentioned", channelconfig.GroupAllowlist, true, []string{"g9"}, false},
		{"allowlist, no chat", channelconfig.GroupAllowlist, true, nil, false},
	}
	for _, tt := range tests {
		c := channelconfig.Common{GroupPolicy: tt.policy, GroupAllowFrom: listed}
		if got := c.AdmitsGroup(tt.mentioned, tt.chats...); got != tt.want {
			t.Errorf("%s: AdmitsGroup = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPolicy(t *testing.T) {
	c := channelconfig.Common{AllowFrom: []string{"u1", "@name"}, DMPolicy: access.DMOpen}
	p := c.Policy("chat")
	if p.Channel != "chat" || !slices.Equal(p.AllowFrom, c.AllowFrom) || p.DM != access.DMOpen {
		t.Errorf("Policy = %+v, want channel chat with the section's allowFrom and dmPolicy", p)
	}
}
