package telegram

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram/telegramtest"
)

// TestStreamedPrefixesFitAsSent: every text a stream can show of an
// answer (each prefix, clipped by shown as the stream clips it) fits in
// one message as Telegram counts it, sent as HTML or, when Telegram
// refuses the HTML, as plain text. Four prefixes of an unfinished table
// counted 4,269 as HTML while shown said 3,969: under load the stream
// posted one (a CI run's TestStreamedTableWithinLimit).
func TestStreamedPrefixesFitAsSent(t *testing.T) {
	lines := []string{"| n | note |", "|---|---|", "| 0 | " + strings.Repeat("wide ", 60) + "|"}
	for i := range 60 {
		lines = append(lines, fmt.Sprintf("| %d | x |", i+1))
	}
	answer := strings.Join(lines, "\n") + "\n\nEND"
	words := strings.SplitAfter(answer, " ")
	for n := range words {
		text := markup.Truncate(strings.TrimSpace(strings.Join(words[:n+1], "")), markup.TelegramLimit)
		text = markup.TruncateRendered(text, maxText, shown)
		if h, p := telegramtest.TextLen(markup.TelegramHTML(text), "HTML"), telegramtest.TextLen(plain(text), ""); h > maxText || p > maxText {
			t.Errorf("prefix of %d words: %d units as HTML, %d as plain text; Telegram takes %d", n+1, h, p, maxText)
		}
	}
}
