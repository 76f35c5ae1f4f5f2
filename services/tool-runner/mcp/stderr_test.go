package mcp

import (
	"log/slog"
	"strings"
	"testing"
)

// TestStderrCutOnCharacters: stderr lines are cut to 400 bytes, and a
// line longer than that without a newline is flushed at a write's end;
// cut inside a character, the tail (quoted in the server's error, which
// reaches the model in a proto string) was invalid UTF-8.
func TestStderrCutOnCharacters(t *testing.T) {
	long := strings.Repeat("错", 134) // 402 bytes
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"short", []string{"started\r\n", "ready\n"}, "started | ready"},
		{"chinese line cut inside a character", []string{strings.Repeat("错", 300) + "\n"}, strings.Repeat("错", 133) + "…"},
		{"emoji line cut inside a character", []string{"a" + strings.Repeat("😀", 150) + "\n"}, "a" + strings.Repeat("😀", 99) + "…"},
		// The first write ends 2 bytes into the 134th character and is
		// flushed; the next line starts with its last byte.
		{"write ends inside a character", []string{long[:401], long[401:] + "ok\n"}, strings.Repeat("错", 133) + "… | \uFFFDok"},
		{"unfinished line ends inside a character", []string{"crash: " + long[:2]}, "crash: \uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &stderrLog{log: slog.New(slog.DiscardHandler)}
			for _, s := range tt.writes {
				if _, err := w.Write([]byte(s)); err != nil {
					t.Fatal(err)
				}
			}
			if got := w.Tail(); got != tt.want {
				t.Errorf("Tail() = %q, want %q", got, tt.want)
			}
		})
	}
}
