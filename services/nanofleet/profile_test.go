package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/profile"
)

// TestProfileSeedCopiesReviewedFiles: the operator's way to change a
// profile that sessions may not: files are copied, links are not followed.
func TestProfileSeedCopiesReviewedFiles(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t)
	kv, err := b.KV(ctx, bus.BucketProfile)
	if err != nil {
		t.Fatal(err)
	}
	ws, host := t.TempDir(), t.TempDir()
	secret := filepath.Join(host, "config.json")
	for p, content := range map[string]string{filepath.Join(ws, "SOUL.md"): "v1", secret: "sk-secret"} {
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	log := slog.New(slog.DiscardHandler)
	if err := seedProfile(ctx, b, ws, &out, log); err != nil {
		t.Fatal(err)
	}
	// Seeded once: a later start does not read the workspace again, the
	// operator's seed does.
	if err := os.WriteFile(filepath.Join(ws, "SOUL.md"), []byte("v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := profile.Seed(ctx, kv, profile.DefaultAgent, ws); err != nil || n != 0 {
		t.Fatalf("start-up Seed = %d, %v; want nothing read", n, err)
	}
	if err := os.Symlink(secret, filepath.Join(ws, "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := seedProfile(ctx, b, ws, &out, log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "1 file(s) copied") {
		t.Errorf("output = %q", out.String())
	}
	if e, err := kv.Get(ctx, profile.FileKey(profile.DefaultAgent, "SOUL.md")); err != nil || string(e.Value()) != "v2" {
		t.Errorf("SOUL.md = %v, %v", e, err)
	}
	if _, err := kv.Get(ctx, profile.FileKey(profile.DefaultAgent, "AGENTS.md")); err == nil {
		t.Error("AGENTS.md, a symlink to a host file, was seeded")
	}
}
