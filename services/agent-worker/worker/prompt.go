package worker

import (
	"time"

	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/prompt"
)

func (t *turn) buildPrompt(hist *session.History, memory string) []*nanofleetv1.ChatMessage {
	w := t.w
	return prompt.Build(prompt.Input{
		Profile:        w.d.Profiles.Get(w.cfg.Agent),
		Memory:         memory,
		Now:            time.Now(),
		Location:       w.cfg.Location,
		Workspace:      w.cfg.Workspace,
		SessionKey:     t.key,
		Channel:        t.in.GetChannel(),
		History:        hist.Turns,
		BudgetTokens:   t.historyBudget(),
		SkillAvailable: skillAvailable,
	})
}

// skillAvailable says whether this worker can offer s: the programs and
// environment variables it requires are here.
func skillAvailable(s profile.Skill) bool { return s.Available(nil, nil) }
