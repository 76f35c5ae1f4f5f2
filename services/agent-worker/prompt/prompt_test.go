package prompt_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/prompt"
)

func turn(user, answer string, tool string) session.Turn {
	msgs := []*nanofleetv1.ChatMessage{{Role: "user", Content: user}}
	if tool != "" {
		msgs = append(msgs,
			&nanofleetv1.ChatMessage{Role: "assistant", ToolCalls: []*nanofleetv1.ToolCall{{Id: "c", Name: "read_file", ArgumentsJson: `{}`}}},
			&nanofleetv1.ChatMessage{Role: "tool", ToolCallId: "c", Name: "read_file", Content: tool})
	}
	msgs = append(msgs, &nanofleetv1.ChatMessage{Role: "assistant", Content: answer})
	return session.Turn{Record: &nanofleetv1.TurnRecord{Messages: msgs}}
}

func TestSystemPrompt(t *testing.T) {
	snap := &profile.Snapshot{
		Files: map[string]string{"SOUL.md": "Be kind.", "USER.md": "Name: Ada"},
		Skills: []profile.Skill{
			{Dir: "a", Name: "always-on", Always: true, Body: "ALWAYS BODY"},
			{Dir: "w", Name: "weather", Description: "forecasts", Body: "WEATHER BODY"},
			{Dir: "x", Name: "hidden", Description: "needs a bin"},
		},
	}
	in := prompt.Input{
		Profile: snap, Memory: "Ada likes tea.", Now: time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC),
		Workspace: "/ws", SessionKey: "cli:1", BudgetTokens: 10_000,
		SkillAvailable: func(s profile.Skill) bool { return s.Name != "hidden" },
	}
	sys := prompt.System(in)
	for _, want := range []string{"Be kind.", "Name: Ada", "Ada likes tea.", "ALWAYS BODY", "weather: forecasts", "2026-11-21 09:30", "/ws"} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
	for _, unwanted := range []string{"WEATHER BODY", "hidden"} {
		if strings.Contains(sys, unwanted) {
			t.Errorf("system prompt has %q", unwanted)
		}
	}
	if strings.Index(sys, "Be kind.") > strings.Index(sys, "Name: Ada") {
		t.Error("SOUL.md should come before USER.md")
	}
}

func TestHistoryWithinBudget(t *testing.T) {
	big := strings.Repeat("x", 4000) // ~1000 tokens
	history := []session.Turn{
		turn("oldest", "a0", ""),
		turn("old with tool", "a1", big),
		turn("recent", "a2", ""),
	}
	tests := []struct {
		name   string
		budget int
		want   []string
		tool   string
	}{
		{"all fits", 5000, []string{"oldest", "old with tool", "recent"}, big},
		{"tool result compacted", 45, []string{"old with tool", "recent"}, "omitted"},
		{"only newest", 15, []string{"recent"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sysOnly := prompt.Build(prompt.Input{Now: time.Now(), BudgetTokens: 0})
			msgs := prompt.Build(prompt.Input{Now: time.Now(), History: history, BudgetTokens: tt.budget + prompt.Estimate(sysOnly[0])})
			var users []string
			var tool string
			for _, m := range msgs {
				switch m.GetRole() {
				case "user":
					users = append(users, m.GetContent())
				case "tool":
					tool = m.GetContent()
				}
			}
			if strings.Join(users, "|") != strings.Join(tt.want, "|") {
				t.Errorf("users = %v, want %v", users, tt.want)
			}
			if tt.tool != "" && !strings.Contains(tool, tt.tool) {
				t.Errorf("tool content %.40q, want %.40q", tool, tt.tool)
			}
		})
	}
}
