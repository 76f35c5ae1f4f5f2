package deploy_test

import (
	"os"
	"path/filepath"
	"testing"
)

// repoRoot is the repository root, relative to this package.
const repoRoot = ".."

// services are the fleet's service binaries, images and compose services.
var services = []string{"channel-gateway", "agent-worker", "tool-runner", "memory-consolidator"}

func readFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
