package fleetstatus_test

import (
	"fmt"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

func TestUsage(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := ctxT(t)
	rec := func(id, session, sender, model string, prompt, completion int64) *nanofleetv1.TurnRecord {
		return &nanofleetv1.TurnRecord{TurnId: id, SessionKey: session, SenderId: sender, Usage: &nanofleetv1.TokenUsage{
			PromptTokens: prompt, CompletionTokens: completion, CachedTokens: prompt / 2, ReasoningTokens: 1, ModelCalls: 2, Model: model,
		}}
	}
	publish := func(recs ...*nanofleetv1.TurnRecord) {
		for _, r := range recs {
			publishTurn(t, b, r)
		}
	}
	// More records than a page, so that Update reads several.
	for range 510 {
		publish(rec("bulk", "telegram:1", "u1", "gpt-a", 10, 1))
	}
	publish(
		rec("t1", "slack:C1", "u2", "gpt-b", 1000, 100),
		&nanofleetv1.TurnRecord{TurnId: "cmd", SessionKey: "slack:C1", SenderId: "u2"}, // a command: no usage
	)
	u := fleetstatus.NewUsage(b.Space)
	if err := u.Update(ctx, b.Direct, stream(t, b, b.Space.HistoryStream())); err != nil {
		t.Fatal(err)
	}
	publish(rec("t2", "slack:C2", "u2", "gpt-b", 500, 50))
	if err := u.Update(ctx, b.Direct, stream(t, b, b.Space.HistoryStream())); err != nil {
		t.Fatal(err)
	}
	s := u.Summary(2)
	want := fleetstatus.Tokens{Turns: 512, ModelCalls: 1024, Prompt: 5100 + 1500, Completion: 510 + 150, Cached: 2550 + 750, Reasoning: 512}
	if s.Total != want {
		t.Errorf("total %+v, want %+v", s.Total, want)
	}
	tests := []struct {
		name  string
		got   []fleetstatus.Tokens
		want  []string
		first fleetstatus.Tokens
	}{
		{"users", s.Users, []string{"telegram:u1", "slack:u2"}, fleetstatus.Tokens{Key: "telegram:u1", Turns: 510, ModelCalls: 1020, Prompt: 5100, Completion: 510, Cached: 2550, Reasoning: 510}},
		{"models", s.Models, []string{"gpt-a", "gpt-b"}, fleetstatus.Tokens{Key: "gpt-a", Turns: 510, ModelCalls: 1020, Prompt: 5100, Completion: 510, Cached: 2550, Reasoning: 510}},
		{"sessions (top 2 of 3)", s.Sessions, []string{"telegram:1", "slack:C1"}, fleetstatus.Tokens{Key: "telegram:1", Turns: 510, ModelCalls: 1020, Prompt: 5100, Completion: 510, Cached: 2550, Reasoning: 510}},
	}
	for _, tt := range tests {
		var keys []string
		for _, g := range tt.got {
			keys = append(keys, g.Key)
		}
		if len(keys) != len(tt.want) || keys[0] != tt.want[0] || keys[1] != tt.want[1] {
			t.Errorf("%s: %v, want %v", tt.name, keys, tt.want)
			continue
		}
		if tt.got[0] != tt.first || tt.got[1].Prompt == 0 {
			t.Errorf("%s: first %+v, want %+v", tt.name, tt.got[0], tt.first)
		}
	}
}

// TestUsageNamesUsers: a user is the sender with its channel; a sender
// that is its channel's only one (the terminal's) is named once.
func TestUsageNamesUsers(t *testing.T) {
	b := bustest.StartJetStream(t)
	tests := []struct{ session, sender, want string }{
		{"telegram:1", "42", "telegram:42"},
		{"cli:direct", "cli", "cli"},
		{"web:c1", "web", "web"},
		{"heartbeat:default", "heartbeat", "heartbeat"},
		{"slack:C1", "", "slack:(unknown)"},
	}
	for i, tt := range tests {
		publishTurn(t, b, &nanofleetv1.TurnRecord{TurnId: fmt.Sprint(i), SessionKey: tt.session, SenderId: tt.sender,
			Usage: &nanofleetv1.TokenUsage{PromptTokens: int64(100 - i), ModelCalls: 1}})
	}
	u := fleetstatus.NewUsage(b.Space)
	if err := u.Update(ctxT(t), b.Direct, stream(t, b, b.Space.HistoryStream())); err != nil {
		t.Fatal(err)
	}
	users := u.Summary(len(tests)).Users
	for i, tt := range tests {
		if i >= len(users) || users[i].Key != tt.want {
			t.Errorf("user of %s from %q = %v, want %q", tt.session, tt.sender, users, tt.want)
		}
	}
}
