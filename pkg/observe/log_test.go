package observe_test

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/observe"
)

func TestOrDiscard(t *testing.T) {
	var buf bytes.Buffer
	given := slog.New(slog.NewTextHandler(&buf, nil))
	tests := []struct {
		name        string
		in          *slog.Logger
		wantEnabled bool
	}{
		{"nil discards", nil, false},
		{"a logger is kept", given, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := observe.OrDiscard(tt.in)
			if l == nil {
				t.Fatal("OrDiscard returned nil")
			}
			if tt.in != nil && l != tt.in {
				t.Error("OrDiscard replaced a logger it was given")
			}
			if got := l.Enabled(t.Context(), slog.LevelError); got != tt.wantEnabled {
				t.Errorf("Enabled(error) = %v, want %v", got, tt.wantEnabled)
			}
			l.Error("logged") // must not panic
		})
	}
	if buf.Len() == 0 {
		t.Error("the kept logger wrote nothing")
	}
}
