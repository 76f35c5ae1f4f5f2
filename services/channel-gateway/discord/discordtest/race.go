package discordtest

import (
	"testing"

	"github.com/nanofleet/nanofleet/pkg/racetest"
)

// skipDisgoRace skips, under -race, a test that starts this fake: it is
// there for disgo's gateway and REST client, and disgo v0.18.15's own
// goroutines race there (found by `make race` on 2026-11-29). `make test`
// runs it.
func skipDisgoRace(t testing.TB) {
	t.Helper()
	racetest.SkipLibraryRace(t, "disgo v0.18.15", "gateway_impl.go:134 and :260 against its heartbeat and listen goroutines, rest_rate_limiter.go:168 against UnlockBucket")
}
