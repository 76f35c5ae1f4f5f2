package worker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/slashcmd"
	"github.com/nanofleet/nanofleet/pkg/textcut"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/subagent"
)

// command is a parsed slash command.
type command struct {
	name string
	args []string
	// ext is set for a command from [Deps.Commands].
	ext Command
	// nanobotOnly is a command of nanobot's that nanofleet has not.
	nanobotOnly bool
}

// parseCommand recognises the built-in slash commands and those in extra.
func parseCommand(text string, extra []Command) (command, bool) {
	fields := strings.Fields(strings.TrimSpace(text))
	if len(fields) == 0 || !strings.HasPrefix(fields[0], "/") {
		return command{}, false
	}
	name := strings.ToLower(fields[0])
	// "/new@MyBot" in Telegram groups.
	if i := strings.IndexByte(name, '@'); i > 0 {
		name = name[:i]
	}
	// Telegram's command names cannot hold '-': nanobot registers
	// /dream_log for /dream-log, and its users type that.
	name = strings.ReplaceAll(name, "_", "-")
	if slices.ContainsFunc(slashcmd.Worker(), func(c slashcmd.Command) bool { return c.Name == name }) {
		return command{name: name, args: fields[1:]}, true
	}
	switch name {
	case "/restart", "/goal", "/trigger", "/dream", "/dream-prompt":
		// nanobot's, which its users type: answered, not sent to the
		// model as a message.
		return command{name: name, args: fields[1:], nanobotOnly: true}, true
	}
	for _, c := range extra {
		if c.Describe().Name == name {
			return command{name: name, args: fields[1:], ext: c}, true
		}
	}
	return command{}, false
}

func isCommand(text, name string) bool {
	c, ok := parseCommand(text, nil)
	return ok && c.name == name
}

// helpText is /help's answer: the worker's commands, then extra's.
func helpText(extra []Command) string {
	var b strings.Builder
	b.WriteString("Commands:")
	for _, c := range slashcmd.Worker() {
		b.WriteString("\n" + c.Line())
	}
	for _, c := range extra {
		b.WriteString("\n" + c.Describe().Line())
	}
	return b.String()
}

// command answers a slash command without the model, committing it as a
// turn so that it is ordered and acknowledged like any other message.
func (t *turn) command(ctx context.Context, c command, info *nanofleetv1.SessionInfo, hist *session.History) (string, error) {
	w := t.w
	rec := &nanofleetv1.TurnRecord{}
	var text string
	switch {
	case c.ext != nil:
		out, err := c.ext.Run(ctx, t.tc(), c.args)
		if err != nil {
			out = "Error: " + err.Error()
		}
		text = out
	case c.nanobotOnly:
		text = nanobotOnlyAnswer(c.name)
	case c.name == "/help":
		text = helpText(w.d.Commands)
	case c.name == "/stop":
		text = "⏹ Stopped. No turn is running now."
	case c.name == "/new":
		if w.d.Memory != nil && hist.LastSeq > 0 {
			if err := w.d.Memory.Archive(ctx, t.in, t.key, subagent.Payer(t.in), info, hist.LastSeq); err != nil {
				return "", fmt.Errorf("/new: archive: %w", err)
			}
		}
		rec.ClearsHistory = true
		text = "New session started."
	case c.name == "/status":
		model := w.cfg.Model
		if info.GetModel() != "" {
			model = info.GetModel()
		}
		// Commands are turns of the history too, without messages:
		// counted, "/model x" made "2 messages (3 turns)" of one exchange.
		msgs, turns := 0, 0
		for _, tr := range hist.Turns {
			if n := len(tr.Record.GetMessages()); n > 0 {
				msgs, turns = msgs+n, turns+1
			}
		}
		text = fmt.Sprintf("Model: %s\nSession: %s\nMessages in context: %s (%s)\nWorker: %s", model, t.key, count(msgs, "message"), count(turns, "turn"), w.cfg.ID)
		if u, turns, err := w.sessions.Usage(ctx, t.key); err != nil {
			t.log.Warn("/status: usage", "err", err)
			text += "\nTokens: unknown (" + err.Error() + ")"
		} else {
			text += "\n" + formatUsage(u, turns)
		}
	case c.name == "/model":
		if len(c.args) == 0 {
			model := w.cfg.Model
			if info.GetModel() != "" {
				model = info.GetModel()
			}
			text = "Current model: " + model
			break
		}
		if _, err := w.sessions.UpdateInfo(ctx, t.key, func(i *nanofleetv1.SessionInfo) { i.Model = c.args[0] }); err != nil {
			return "", fmt.Errorf("/model: %w", err)
		}
		text = "Model for this session set to " + c.args[0] + "."
	case c.name == "/history":
		if n, ok := historyCount(c.args); ok {
			text = formatHistory(hist, n)
		} else {
			text = historyUsage
		}
	case c.name == "/skill":
		text = formatSkills(w.d.Profiles.Get(w.cfg.Agent).Skills, skillAvailable)
	}
	t.reply(nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, text)
	if err := t.commit(context.WithoutCancel(ctx), hist, rec, nil); err != nil {
		return "", err
	}
	return "command", nil
}

// nanobotOnlyAnswer answers a command of nanobot's that nanofleet has not.
func nanobotOnlyAnswer(name string) string {
	switch name {
	case "/restart":
		return "/restart is nanobot's: nanofleet does not restart from a chat (its services are restarted by whoever runs them). /new starts a fresh conversation; /help lists the commands."
	case "/dream", "/dream-prompt":
		return name + " is nanobot's: here Dream runs on its own schedule (memory.dream); /dream-log shows what it changed. /help lists the commands."
	}
	return name + " is nanobot's; nanofleet has no such command. /help lists the ones it has."
}

// historyUsage answers a /history whose argument is not a count.
const historyUsage = "Usage: /history [n] — show the last n messages (10 without n); n is a whole number from 1."

// historyCount is how many messages /history shows: 10, or the one
// argument when it is a whole number from 1; ok is false otherwise.
func historyCount(args []string) (n int, ok bool) {
	switch len(args) {
	case 0:
		return 10, true
	case 1:
		n, err := strconv.Atoi(args[0])
		return n, err == nil && n > 0
	}
	return 0, false
}

// formatUsage is /status's line on the session's tokens.
func formatUsage(u *nanofleetv1.TokenUsage, turns int) string {
	if turns == 0 {
		return "Tokens: none used yet"
	}
	return fmt.Sprintf("Tokens: %d in (%d cached), %d out (%d reasoning), over %s in %s",
		u.GetPromptTokens(), u.GetCachedTokens(), u.GetCompletionTokens(), u.GetReasoningTokens(), count(int(u.GetModelCalls()), "model call"), count(turns, "turn"))
}

// count is n and noun, plural unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// formatSkills is /skill's answer: the skills the prompt offers (as
// nanobot's /skill lists its enabled ones), always-on ones marked, then
// those whose requirements this worker lacks, which the prompt leaves out.
func formatSkills(skills []profile.Skill, available func(profile.Skill) bool) string {
	var on, off []string
	for _, s := range skills {
		line := "- " + s.Name
		if s.Description != "" {
			line += ": " + s.Description
		}
		switch {
		case !available(s):
			off = append(off, line)
		case s.Always:
			on = append(on, line+" (always on)")
		default:
			on = append(on, line)
		}
	}
	if len(on)+len(off) == 0 {
		return "No skills. A skill is skills/<name>/SKILL.md in the agent's profile (nanofleet profile seed copies the workspace's)."
	}
	text := "Skills:\n" + strings.Join(on, "\n")
	if len(on) == 0 {
		text = "No skill can be used here."
	}
	if len(off) > 0 {
		text += "\n\nNot available (a program or environment variable they need is missing):\n" + strings.Join(off, "\n")
	}
	return text
}

func formatHistory(hist *session.History, n int) string {
	var lines []string
	for _, tr := range hist.Turns {
		for _, m := range tr.Record.GetMessages() {
			if (m.GetRole() == "user" || m.GetRole() == "assistant") && strings.TrimSpace(m.GetContent()) != "" {
				// Cut on a character boundary: proto refuses half a one.
				lines = append(lines, m.GetRole()+": "+textcut.Clip(strings.ReplaceAll(m.GetContent(), "\n", " "), 200))
			}
		}
	}
	if len(lines) == 0 {
		return "No messages yet."
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
