package racetest

import "testing"

// TestSkipLibraryRace: under -race the test is skipped, otherwise it runs
// on past the call.
func TestSkipLibraryRace(t *testing.T) {
	ran := false
	t.Run("library", func(t *testing.T) {
		SkipLibraryRace(t, "lib", "lib.go:1")
		ran = true
	})
	if ran == Enabled {
		t.Errorf("with the race detector %v, the test ran on: %v", Enabled, ran)
	}
}
