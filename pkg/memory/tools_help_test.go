package memory_test

import (
	"testing"

	"github.com/nanofleet/nanofleet/pkg/agenttool"
	"github.com/nanofleet/nanofleet/pkg/memory"
)

// TestDreamCommandsHelp: /help shows each command's arguments after its
// name, then what it does.
func TestDreamCommandsHelp(t *testing.T) {
	tests := []struct {
		c    agenttool.Command
		want string
	}{
		{memory.DreamRestoreCommand{}, "/dream-restore <number> — Undo a memory revision from /dream-log"},
		{memory.DreamLogCommand{}, "/dream-log [n] — What Dream changed in memory, newest first (default 10)"},
	}
	for _, tt := range tests {
		if got := tt.c.Describe().Line(); got != tt.want {
			t.Errorf("help line %q, want %q", got, tt.want)
		}
	}
}
