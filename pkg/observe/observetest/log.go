package observetest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// LogFunc is a logger that gives every record, at any level, to f, for a
// test that waits on what a component logs.
func LogFunc(f func(slog.Record)) *slog.Logger { return slog.New(recordFunc(f)) }

type recordFunc func(slog.Record)

func (h recordFunc) Enabled(context.Context, slog.Level) bool      { return true }
func (h recordFunc) Handle(_ context.Context, r slog.Record) error { h(r); return nil }
func (h recordFunc) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h recordFunc) WithGroup(string) slog.Handler                 { return h }

// FirstLogged returns a logger and a channel that receives the first
// record given to the logger whose message contains substr; later ones
// are dropped. For a test that times or waits on one event a component
// logs: the record's Time is when it was logged.
func FirstLogged(substr string) (*slog.Logger, <-chan slog.Record) {
	first := make(chan slog.Record, 1)
	var once sync.Once
	return LogFunc(func(r slog.Record) {
		if strings.Contains(r.Message, substr) {
			once.Do(func() { first <- r })
		}
	}), first
}
