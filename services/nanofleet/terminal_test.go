package main

import (
	"bytes"
	"testing"
)

func TestPlainWriterDropsTerminalControls(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"text", []string{"héllo\twörld\n✓"}, "héllo\twörld\n✓"},
		{"OSC 52 sets the clipboard", []string{"a\x1b]52;c;cHduZWQ=\x07b"}, "a]52;c;cHduZWQ=b"},
		{"CSI clears the screen", []string{"a\x1b[2J\x1b[31mred"}, "a[2J[31mred"},
		{"CR and backspace hide text", []string{"rm -rf ~\rls\b\b"}, "rm -rf ~ls"},
		{"C1 CSI", []string{"a\u009b2Jb"}, "a2Jb"},
		{"C1 split between writes", []string{"a\xc2", "\x9b2J"}, "a2J"},
		{"character split between writes", []string{"a\xc2", "\xa0b"}, "a\u00a0b"},
		{"DEL and NUL", []string{"a\x7f\x00b"}, "ab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			w := &plainWriter{w: &out}
			for _, s := range tt.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if got := out.String(); got != tt.want {
				t.Errorf("printed %q, want %q", got, tt.want)
			}
		})
	}
}

// A model's answer (led by a fetched page, or repeating a command's
// output) reaches the terminal without escape sequences: 'agent -m'
// printed it byte for byte, so an OSC 52 in it set the user's clipboard.
func TestAgentPrintsNoTerminalControls(t *testing.T) {
	if _, _, got := agentOneShot(t, "A\x1b]52;c;cHduZWQ=\x07B\r\u009bC"); got != "A]52;c;cHduZWQ=BC" {
		t.Fatalf("stdout = %q", got)
	}
}
