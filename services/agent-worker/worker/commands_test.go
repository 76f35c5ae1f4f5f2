package worker

import (
	"context"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/agenttool"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/slashcmd"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// TestFormatHistoryCutsOnCharacters: /history cuts each message to 200
// bytes; a cut inside a character made the reply invalid UTF-8, which
// proto.Marshal refuses.
func TestFormatHistoryCutsOnCharacters(t *testing.T) {
	tests := []struct{ name, content, want string }{
		{"short", "hello\nthere", "user: hello there"},
		{"chinese cut inside a character", "a" + strings.Repeat("你", 100), "user: a" + strings.Repeat("你", 66) + "…"},
		{"emoji cut inside a character", "ab" + strings.Repeat("😀", 60), "user: ab" + strings.Repeat("😀", 49) + "…"},
		{"chinese cut at a boundary", "ab" + strings.Repeat("好", 80), "user: ab" + strings.Repeat("好", 66) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hist := &session.History{Turns: []session.Turn{{Record: &nanofleetv1.TurnRecord{
				Messages: []*nanofleetv1.ChatMessage{{Role: "user", Content: tt.content}},
			}}}}
			if got := formatHistory(hist, 10); got != tt.want {
				t.Errorf("formatHistory = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestHistoryCount: /history takes no argument or a count; anything else
// is answered with the usage (it was ignored, showing 10).
func TestHistoryCount(t *testing.T) {
	tests := []struct {
		args []string
		n    int
		ok   bool
	}{
		{nil, 10, true},
		{[]string{"3"}, 3, true},
		{[]string{"abc"}, 0, false},
		{[]string{"0"}, 0, false},
		{[]string{"-2"}, 0, false},
		{[]string{"2.5"}, 0, false},
		{[]string{"3", "4"}, 0, false},
	}
	for _, tt := range tests {
		n, ok := historyCount(tt.args)
		if ok != tt.ok || ok && n != tt.n {
			t.Errorf("historyCount(%q) = %d, %t; want %d, %t", tt.args, n, ok, tt.n, tt.ok)
		}
	}
}

type namedCommand string

func (c namedCommand) Describe() slashcmd.Command { return slashcmd.Command{Name: string(c)} }
func (namedCommand) Run(context.Context, *agenttool.TurnContext, []string) (string, error) {
	return "", nil
}

// TestParseCommand: commands as typed on each platform: a bot's name
// after them in Telegram groups, '_' for '-' as Telegram's command menu
// (and nanobot's) writes them; text that is none goes to the model.
func TestParseCommand(t *testing.T) {
	extra := []Command{namedCommand("/dream-log")}
	tests := []struct {
		text, name string
		args       []string
	}{
		{"/history 3", "/history", []string{"3"}},
		{"/New@MyBot", "/new", []string{}},
		{"/dream-log 2", "/dream-log", []string{"2"}},
		{"/dream_log 2", "/dream-log", []string{"2"}},
		{"/dream_log@MyBot", "/dream-log", []string{}},
		{"/dreams", "", nil},
		{"/restart", "/restart", []string{}},
		{"/dream_prompt keep it short", "/dream-prompt", []string{"keep", "it", "short"}},
		{"hello /new", "", nil},
	}
	for _, tt := range tests {
		c, ok := parseCommand(tt.text, extra)
		if ok != (tt.name != "") || ok && (c.name != tt.name || strings.Join(c.args, " ") != strings.Join(tt.args, " ")) {
			t.Errorf("parseCommand(%q) = %q %q, %t; want %q %q", tt.text, c.name, c.args, ok, tt.name, tt.args)
		}
	}
}

// TestMenuCommandsAnswered: every command a platform's menu offers
// (slashcmd.Menu) is one the fleet answers: the worker's own, or the
// memory's that the agent worker adds.
func TestMenuCommandsAnswered(t *testing.T) {
	extra := []Command{memory.DreamLogCommand{}, memory.DreamRestoreCommand{}}
	for _, e := range slashcmd.Menu() {
		if c, ok := parseCommand(e.Name, extra); !ok || c.name != e.Name {
			t.Errorf("menu command %s is not answered", e.Name)
		}
	}
}
