package sandbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
)

// TestExecSaysWhichDirectoryToOpen: a root runner's commands run as
// another user; under a HOME that user cannot enter (root's, 0700), exec
// is refused naming the chmod to run instead of bubblewrap's "Can't find
// source path", and works once it is run, without a restart.
func TestExecSaysWhichDirectoryToOpen(t *testing.T) {
	e := newExecutor(t, nil)
	if _, _, ok := e.Owner(); !ok {
		t.Skip("commands run as this user: only a root runner drops to another one")
	}
	ws := workspace(t, e)
	home := filepath.Dir(filepath.Dir(ws))
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, e, ws, "true", 10*time.Second)
	if !errors.Is(err, sandbox.ErrSandboxUnavailable) || !strings.Contains(err.Error(), "chmod o+x "+home) {
		t.Fatalf("exec under a closed directory: %v; want a refusal naming `chmod o+x %s`", err, home)
	}
	if err := os.Chmod(home, 0o711); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, e, ws, "echo reached", 10*time.Second)
	if err != nil || !strings.Contains(out.Output, "reached") {
		t.Fatalf("exec after the chmod: %v, %+v", err, out)
	}
}
