package memory

import (
	"fmt"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/textcut"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Estimate is the approximate token cost of a message: a token per four
// bytes, as the worker's prompt builder counts.
func Estimate(m *nanofleetv1.ChatMessage) int {
	n := len(m.GetContent()) + len(m.GetReasoningContent())
	for _, c := range m.GetToolCalls() {
		n += len(c.GetName()) + len(c.GetArgumentsJson())
	}
	return n/4 + 4 + 85*len(m.GetMedia())
}

// EstimateTurn is the approximate token cost of a turn's messages.
func EstimateTurn(t session.Turn) int {
	n := 0
	for _, m := range t.Record.GetMessages() {
		n += Estimate(m)
	}
	return n
}

// EstimateText is the approximate token cost of text.
func EstimateText(s string) int { return len(s) / 4 }

// Transcript renders turns the way nanobot archives them:
// "[2006-01-02 15:04] USER: text", tool calls named, tool results clipped.
func Transcript(turns []session.Turn, toolChars int) string {
	var b strings.Builder
	for _, t := range turns {
		stamp := ""
		if ts := t.Record.GetCompletedAt(); ts != nil {
			stamp = ts.AsTime().UTC().Format("2006-01-02 15:04")
		}
		for _, m := range t.Record.GetMessages() {
			content := strings.TrimSpace(m.GetContent())
			var tools []string
			for _, c := range m.GetToolCalls() {
				tools = append(tools, c.GetName())
			}
			if content == "" && len(tools) == 0 {
				continue
			}
			at := stamp
			if ts := m.GetCreatedAt(); ts != nil {
				at = ts.AsTime().UTC().Format("2006-01-02 15:04")
			}
			role := strings.ToUpper(m.GetRole())
			if m.GetRole() == "tool" {
				role = "TOOL " + m.GetName()
				content = textcut.Clip(content, toolChars)
			}
			if len(tools) > 0 {
				role += " [tools: " + strings.Join(tools, ", ") + "]"
			}
			if at != "" {
				fmt.Fprintf(&b, "[%s] ", at)
			}
			fmt.Fprintf(&b, "%s: %s\n", role, content)
		}
	}
	return strings.TrimSpace(b.String())
}

// FormatEntry renders an entry for the prompt, the search tool and the
// CLI.
func FormatEntry(e *nanofleetv1.HistoryEntry) string {
	text := strings.TrimSpace(e.GetText())
	if e.GetRaw() {
		text = "(archived as is)\n" + text
	}
	if !strings.HasPrefix(text, "[") && e.GetCreatedAt() != nil {
		text = "[" + e.GetCreatedAt().AsTime().UTC().Format("2006-01-02 15:04") + "] " + text
	}
	return text
}

// formatTime renders t for people.
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }
