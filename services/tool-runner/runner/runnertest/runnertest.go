// Package runnertest runs a tool runner for the length of a test.
package runnertest

import (
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
)

// Run runs r until the test ends (svctest.Run) and returns once it takes
// calls, failing the test if it does not within a minute. stop ends Run
// early and returns its error, failing the test if Run does not return
// within a minute; the cleanup calls it too, and reports an error no
// caller of stop took.
func Run(t testing.TB, r *runner.Runner) (stop func() error) {
	t.Helper()
	return svctest.Run(t, r.Run, svctest.Ready(r.Serving(), time.Minute), svctest.StopWithin(time.Minute))
}
