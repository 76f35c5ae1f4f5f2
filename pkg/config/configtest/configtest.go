// Package configtest holds test helpers for code that validates config.
package configtest

import (
	"errors"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config"
)

// WantProblems fails t unless err is an invalid config error whose lines,
// one per problem and in order, begin with "invalid config: " and each of
// want.
func WantProblems(t testing.TB, err error, want ...string) {
	t.Helper()
	if !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("err = %v, want an invalid config error", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], "invalid config: "+w) {
			t.Errorf("line %d = %q, want it to begin %q", i, lines[i], w)
		}
	}
}
