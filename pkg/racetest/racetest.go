// Package racetest tells a test whether it runs under the race detector
// (`go test -race`, `make race`), for the few tests that drive a library
// whose own goroutines race with each other.
package racetest

import "testing"

// SkipLibraryRace skips t under the race detector, naming the library
// whose race would fail it, and where; without -race t runs as usual.
func SkipLibraryRace(t testing.TB, library, where string) {
	t.Helper()
	if Enabled {
		t.Skipf("skipping under -race: %s races with itself (%s); `make test` runs this test", library, where)
	}
}
