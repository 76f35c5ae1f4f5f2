package onboard_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/services/nanofleet/onboard"
)

func TestWriteKeepsUserFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	ws := filepath.Join(dir, "workspace")
	res, err := onboard.Write(cfg, ws, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Wrote) < 6 || len(res.Kept) != 0 {
		t.Fatalf("first onboard: wrote %v, kept %v", res.Wrote, res.Kept)
	}
	// Every bootstrap file the prompt reads, so that the README's list holds.
	for _, f := range append(slices.Clone(profile.BootstrapFiles), "memory/MEMORY.md", "skills/weather/SKILL.md") {
		if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if st, err := os.Stat(cfg); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("config file: %v, mode %v; want 0600 (it holds API keys)", err, st.Mode().Perm())
	}
	if err := os.WriteFile(filepath.Join(ws, "SOUL.md"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = onboard.Write(cfg, ws, false)
	if err != nil || len(res.Wrote) != 0 {
		t.Fatalf("second onboard wrote %v, %v", res.Wrote, err)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "SOUL.md")); string(data) != "mine" {
		t.Error("onboard overwrote the user's SOUL.md")
	}
}

func TestConfigTemplateLoads(t *testing.T) {
	if !json.Valid([]byte(onboard.ConfigTemplate)) {
		t.Fatal("template is not JSON")
	}
	f := config.Defaults()
	if err := config.Parse(f, []byte(onboard.ConfigTemplate), func(string) string { return "" }); err != nil {
		t.Fatalf("template does not load: %v", err)
	}
	var tools struct {
		Exec map[string]any `json:"exec"`
	}
	if err := f.Section("tools", &tools); err != nil {
		t.Fatal(err)
	}
}
