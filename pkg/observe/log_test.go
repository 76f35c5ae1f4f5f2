package observe_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

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

func TestExcerpt(t *testing.T) {
	long := strings.Repeat("a", 250)
	// 199 ASCII bytes then "é" (2 bytes) straddles the 200-byte cut.
	straddle := strings.Repeat("a", 199) + "é" + strings.Repeat("b", 50)
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", ""},
		{"short is whole", `{"ok":true}`, `{"ok":true}`},
		{"exactly the limit is whole", long[:200], long[:200]},
		{"long is cut and marked", long, long[:200] + "…"},
		{"a rune is never split", straddle, straddle[:199] + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := observe.Excerpt([]byte(tt.in))
			if got != tt.want {
				t.Errorf("Excerpt = %q, want %q", got, tt.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("Excerpt returned invalid UTF-8: %q", got)
			}
		})
	}
}
