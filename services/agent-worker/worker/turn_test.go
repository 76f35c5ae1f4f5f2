package worker

import (
	"errors"
	"strings"
	"testing"
)

// TestShortErrorCutsOnCharacters: the error reply quotes at most 160
// bytes of the error; a cut inside a character made the reply invalid
// UTF-8, which proto.Marshal refuses, and the user got no reply.
func TestShortErrorCutsOnCharacters(t *testing.T) {
	tests := []struct{ name, err, want string }{
		{"short", "model: timeout", "model: timeout"},
		{"long keeps the last cause", strings.Repeat("x", 150) + ": rate limited", "rate limited"},
		{"chinese cut inside a character", "model: " + strings.Repeat("错", 100), strings.Repeat("错", 53) + "…"},
		{"emoji cut inside a character", "x" + strings.Repeat("😀", 50), "x" + strings.Repeat("😀", 39) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shortError(errors.New(tt.err)); got != tt.want {
				t.Errorf("shortError = %q, want %q", got, tt.want)
			}
		})
	}
}
