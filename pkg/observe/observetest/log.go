package observetest

import (
	"context"
	"log/slog"
)

// LogFunc is a logger that gives every record, at any level, to f, for a
// test that waits on what a component logs.
func LogFunc(f func(slog.Record)) *slog.Logger { return slog.New(recordFunc(f)) }

type recordFunc func(slog.Record)

func (h recordFunc) Enabled(context.Context, slog.Level) bool      { return true }
func (h recordFunc) Handle(_ context.Context, r slog.Record) error { h(r); return nil }
func (h recordFunc) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h recordFunc) WithGroup(string) slog.Handler                 { return h }
