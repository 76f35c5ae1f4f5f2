package memoryconsolidator_test

import (
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config/configtest"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/memoryconsolidator"
)

// TestEveryMemoryProblemAtOnce: the memory section names every unknown
// key and bad value of its parts in one error, a line each (it named the
// first, and a typo hid the values).
func TestEveryMemoryProblemAtOnce(t *testing.T) {
	f := parse(t, `{"memory": {
		"scope": "x", "consolidateShare": 2,
		"consolidator": {"slots": -1, "chunkTokens": 10, "slot": 1},
		"dream": {"every": "soon", "maxEntries": 0}
	}}`)
	_, _, _, _, err := memoryconsolidator.Configs(f, "c")
	want := []string{
		"memory.consolidator.slot: unknown key",
		`memory.scope: must be agent, user or session, got "x"`,
		"memory.consolidateShare: must be in (0, 1], got 2",
		"memory.consolidator.slots: must be at least 1, got -1",
		"memory.consolidator.chunkTokens: must be at least 100, got 10",
		`memory.dream.every: time: invalid duration "soon"`,
		"memory.dream.maxEntries: must be at least 1, got 0",
	}
	configtest.WantProblems(t, err, want...)
}
