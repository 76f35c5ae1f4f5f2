// Package prompt builds what the model sees at the start of a turn: the
// system prompt (identity, bootstrap files, memory, skills) and as much of
// the session's history as fits the context budget.
//
// Token counts are estimated as one token per four bytes, which is close
// for English and code and errs high for most other text; an exact count
// would need each provider's tokenizer.
package prompt

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Input is everything a prompt is built from.
type Input struct {
	Profile *profile.Snapshot
	// Memory is the scope's long-term memory (MEMORY.md) and recent
	// history entries, already within their own budget.
	Memory string
	// Now and Location stamp the identity block.
	Now      time.Time
	Location *time.Location
	// Workspace is the path tools see.
	Workspace  string
	SessionKey string
	Channel    string
	// History of the session, oldest first.
	History []session.Turn
	// BudgetTokens bounds system prompt plus history.
	BudgetTokens int
	// SkillAvailable decides whether a skill is offered; nil offers all.
	SkillAvailable func(profile.Skill) bool
}

// Build returns the system message followed by the history that fits.
func Build(in Input) []*nanofleetv1.ChatMessage {
	sys := &nanofleetv1.ChatMessage{Role: "system", Content: System(in)}
	left := in.BudgetTokens - Estimate(sys)
	return append([]*nanofleetv1.ChatMessage{sys}, fitHistory(in.History, left)...)
}

// System renders the system prompt.
func System(in Input) string {
	var b strings.Builder
	loc := in.Location
	if loc == nil {
		loc = time.UTC
	}
	now := in.Now.In(loc)
	fmt.Fprintf(&b, "# nanofleet\n\nYou are nanofleet, a helpful personal AI assistant. You can use tools to read and write files in your workspace, run commands, search and fetch the web, send messages and schedule tasks.\n\n")
	fmt.Fprintf(&b, "## Runtime\n- Current time: %s (%s)\n- Runtime: %s/%s, Go\n- Workspace: %s\n- Session: %s\n\n",
		now.Format("2006-01-02 15:04 Monday"), loc.String(), runtime.GOOS, runtime.GOARCH, in.Workspace, in.SessionKey)
	if in.Profile != nil {
		for _, name := range profile.BootstrapFiles {
			if text := strings.TrimSpace(in.Profile.Files[name]); text != "" {
				fmt.Fprintf(&b, "## %s\n\n%s\n\n", name, text)
			}
		}
	}
	if m := strings.TrimSpace(in.Memory); m != "" {
		fmt.Fprintf(&b, "# Memory\n\n%s\n\n", m)
	}
	if in.Profile != nil {
		writeSkills(&b, in.Profile.Skills, in.SkillAvailable)
	}
	return strings.TrimSpace(b.String())
}

func writeSkills(b *strings.Builder, skills []profile.Skill, available func(profile.Skill) bool) {
	var always, listed []profile.Skill
	for _, s := range skills {
		if available != nil && !available(s) {
			continue
		}
		if s.Always {
			always = append(always, s)
		} else {
			listed = append(listed, s)
		}
	}
	if len(always) > 0 {
		b.WriteString("# Active skills\n\n")
		for _, s := range always {
			fmt.Fprintf(b, "## %s\n\n%s\n\n", s.Name, s.Body)
		}
	}
	if len(listed) > 0 {
		b.WriteString("# Skills\n\nRead a skill's file with read_file (skills/<name>/SKILL.md) before using it.\n\n")
		for _, s := range listed {
			fmt.Fprintf(b, "- %s: %s (skills/%s/SKILL.md)\n", s.Name, s.Description, s.Dir)
		}
		b.WriteString("\n")
	}
}

// fitHistory keeps the newest turns that fit budget. An older turn that
// does not fit whole is tried once more with its tool results compacted to
// a one-line note; the first turn that fits neither way ends the history.
func fitHistory(turns []session.Turn, budget int) []*nanofleetv1.ChatMessage {
	var kept [][]*nanofleetv1.ChatMessage
	for i := len(turns) - 1; i >= 0; i-- {
		msgs := turns[i].Record.GetMessages()
		if len(msgs) == 0 {
			continue
		}
		cost := EstimateAll(msgs)
		if cost > budget {
			msgs = compact(msgs)
			cost = EstimateAll(msgs)
		}
		if cost > budget {
			break
		}
		budget -= cost
		kept = append(kept, msgs)
	}
	var out []*nanofleetv1.ChatMessage
	for i := len(kept) - 1; i >= 0; i-- {
		out = append(out, kept[i]...)
	}
	return out
}

// compact replaces tool results with a one-line note.
func compact(msgs []*nanofleetv1.ChatMessage) []*nanofleetv1.ChatMessage {
	out := make([]*nanofleetv1.ChatMessage, len(msgs))
	for i, m := range msgs {
		if m.GetRole() != "tool" || len(m.GetContent()) < 200 {
			out[i] = m
			continue
		}
		out[i] = &nanofleetv1.ChatMessage{
			Role: "tool", ToolCallId: m.GetToolCallId(), Name: m.GetName(),
			Content: fmt.Sprintf("[%s result of %d chars omitted to save context]", m.GetName(), len(m.GetContent())),
		}
	}
	return out
}

// Estimate is the approximate token cost of one message.
func Estimate(m *nanofleetv1.ChatMessage) int {
	n := len(m.GetContent()) + len(m.GetReasoningContent())
	for _, c := range m.GetToolCalls() {
		n += len(c.GetName()) + len(c.GetArgumentsJson())
	}
	return n/4 + 4 + 85*len(m.GetMedia())
}

// EstimateAll sums [Estimate] over msgs.
func EstimateAll(msgs []*nanofleetv1.ChatMessage) int {
	n := 0
	for _, m := range msgs {
		n += Estimate(m)
	}
	return n
}
