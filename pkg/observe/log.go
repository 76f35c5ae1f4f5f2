package observe

import "log/slog"

// OrDiscard returns l, or a logger that discards everything when l is
// nil. Every WithLogger option stores what it returns, so that
// WithLogger(nil) means no logs rather than a panic at the first one.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
