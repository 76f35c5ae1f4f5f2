package memory_test

import (
	"errors"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/memory"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

func TestScopeKeyRoundTrip(t *testing.T) {
	for _, s := range []memory.Scope{
		memory.AgentScope("default"),
		memory.UserScope("default", "ada"),
		memory.UserScope("bot.2", "telegram:123"),
		memory.SessionScope("default", "slack:C1 thread.x*>"),
		memory.UserScope("default", "Zoë"),
	} {
		got, err := memory.ParseScope(s.Key())
		if err != nil || got != s {
			t.Errorf("ParseScope(%q) = %v, %v; want %v", s.Key(), got, err, s)
		}
	}
}

func TestParseScopeRejects(t *testing.T) {
	for _, key := range []string{"", "agent", "agent.default", "agent.default.x", "user.default.=", "robot.default.x", "user.a.b.c", "user.=.ada"} {
		if _, err := memory.ParseScope(key); !errors.Is(err, memory.ErrBadScope) {
			t.Errorf("ParseScope(%q) = %v, want ErrBadScope", key, err)
		}
	}
}

func TestParseScopeName(t *testing.T) {
	tests := []struct {
		name string
		want memory.Scope
		ok   bool
	}{
		{"agent", memory.AgentScope("a"), true},
		{"user:ada", memory.UserScope("a", "ada"), true},
		{"session:telegram:42", memory.SessionScope("a", "telegram:42"), true},
		{"user:", memory.Scope{}, false},
		{"agent:x", memory.Scope{}, false},
		{"team:x", memory.Scope{}, false},
	}
	for _, tt := range tests {
		got, err := memory.ParseScopeName("a", tt.name)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseScopeName(%q) = %v, %v", tt.name, got, err)
		}
	}
}

func TestIsGroup(t *testing.T) {
	tests := []struct {
		md   map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"chat_type": "private"}, false},
		{map[string]string{"chat_type": "group"}, true},
		{map[string]string{"chat_type": "supergroup"}, true},
		{map[string]string{"channel_type": "im"}, false},
		{map[string]string{"channel_type": "mpim"}, true},
		{map[string]string{"is_group": "true"}, true},
	}
	for _, tt := range tests {
		if got := memory.IsGroup(&nanofleetv1.InboundMessage{Metadata: tt.md}); got != tt.want {
			t.Errorf("IsGroup(%v) = %v", tt.md, got)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  memory.Config
		ok   bool
	}{
		{"zero is default", memory.Config{}, true},
		{"user", memory.Config{Scope: "user"}, true},
		{"bad scope", memory.Config{Scope: "team"}, false},
		{"bad group scope", memory.Config{Scope: "user", GroupScope: "user"}, false},
		{"share above one", memory.Config{ConsolidateShare: 1.5}, false},
		{"negative share", memory.Config{ConsolidateShare: -0.1}, false},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v", tt.name, err)
		}
	}
}

func TestLineDelta(t *testing.T) {
	tests := []struct {
		before, after string
		add, del      int
	}{
		{"", "", 0, 0},
		{"", "a\nb\n", 2, 0},
		{"a\nb", "a\nb", 0, 0},
		{"a\nb", "a\nc", 1, 1},
		{"a\na\nb", "a\nb", 0, 1},
	}
	for _, tt := range tests {
		a, d := memory.LineDelta(tt.before, tt.after)
		if a != tt.add || d != tt.del {
			t.Errorf("LineDelta(%q, %q) = +%d -%d, want +%d -%d", tt.before, tt.after, a, d, tt.add, tt.del)
		}
	}
}
