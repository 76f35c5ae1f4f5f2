package observe

import (
	"log/slog"

	"github.com/nanofleet/nanofleet/pkg/textcut"
)

// OrDiscard returns l, or a logger that discards everything when l is
// nil. Every WithLogger option stores what it returns, so that
// WithLogger(nil) means no logs rather than a panic at the first one.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// excerptBytes is how much of a payload Excerpt keeps.
const excerptBytes = 200

// Excerpt returns the start of a payload for a log line about it (a
// malformed event, a refused request): enough to recognise it, never a
// whole body. It cuts at a rune boundary and marks the cut with "…".
func Excerpt(raw []byte) string { return textcut.Clip(raw, excerptBytes) }
