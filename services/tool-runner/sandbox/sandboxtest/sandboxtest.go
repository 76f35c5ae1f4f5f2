// Package sandboxtest holds test helpers for code that runs commands in
// the sandbox.
package sandboxtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
)

// RequireBwrap skips the test when bubblewrap cannot run on this machine
// at all (`bwrap --ro-bind / / true` fails), saying why. Anything short of
// that is a test failure, not a skip.
func RequireBwrap(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bwrap", "--ro-bind", "/", "/", "true").CombinedOutput()
	if err != nil {
		t.Skipf("bubblewrap cannot run here, skipping a test that needs it: `bwrap --ro-bind / / true`: %v: %s", err, out)
	}
}

// Config is the default sandbox config with limits small enough for
// tests: 16 MB files, 64 processes, 1 GB of address space.
func Config() sandbox.Config {
	c := sandbox.DefaultConfig()
	c.Limits.FileSizeMB = 16
	c.Limits.Processes = 64
	c.Limits.AddressSpaceMB = 1024
	c.Limits.CPUSeconds = 30
	c.TmpSizeMB = 32
	return c
}

// BaseDir is a fresh temp dir the sandbox's unprivileged user can pass
// through: the test's temp dirs are 0700 and owned by the test's user.
func BaseDir(t testing.TB) string {
	t.Helper()
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return base
}
