package onboard_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/services/agent-worker/agentworker"
	"github.com/nanofleet/nanofleet/services/agent-worker/worker"
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

// TestForceReplacesPlantedLinks: links a session planted in the
// workspace are replaced by onboard --force, never written through.
func TestForceReplacesPlantedLinks(t *testing.T) {
	dir := t.TempDir()
	cfg, ws, host := filepath.Join(dir, "config.json"), filepath.Join(dir, "workspace"), filepath.Join(dir, "host")
	for _, d := range []string{filepath.Join(ws, "memory.old"), host} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(host, "bashrc")
	if err := os.WriteFile(target, []byte("host file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{"SOUL.md": target, "memory": host} {
		if err := os.Symlink(to, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := onboard.Write(cfg, ws, true)
	if err == nil {
		t.Error("onboard wrote through the symlinked memory directory without an error")
	}
	if data, _ := os.ReadFile(target); string(data) != "host file" {
		t.Errorf("host file = %q", data)
	}
	if entries, _ := os.ReadDir(host); len(entries) != 1 {
		t.Errorf("host directory holds %d entries", len(entries))
	}
	if fi, err := os.Lstat(filepath.Join(ws, "SOUL.md")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("SOUL.md after onboard: %v, %v", fi, err)
	}
}

// TestConfigTemplateKeepsDefaultSlots: a config written by onboard must
// give the worker the turn slots the shipped defaults are sized for
// (issue 20); an onboarded user would otherwise run a smaller fleet than
// the bench measures.
func TestConfigTemplateKeepsDefaultSlots(t *testing.T) {
	f := config.Defaults()
	if err := config.Parse(f, []byte(onboard.ConfigTemplate), func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := agentworker.ConfigFrom(f, "w", "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	if want := worker.DefaultConfig(); cfg.Slots != want.Slots || cfg.FleetTurnLimit != want.FleetTurnLimit {
		t.Errorf("onboard's config gives turnsPerWorker %d, fleetTurnLimit %d; the defaults are %d, %d",
			cfg.Slots, cfg.FleetTurnLimit, want.Slots, want.FleetTurnLimit)
	}
}

// TestConfigNamesTheWorkspace: the config onboard writes names the
// workspace it wrote the templates to (it named ~/.nanofleet/workspace
// whatever --workspace said), with ~ under the home directory, so that a
// fleet started with it reads them.
func TestConfigNamesTheWorkspace(t *testing.T) {
	home, elsewhere := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	tests := []struct {
		name, workspace, want string
	}{
		{"the default", filepath.Join(home, ".nanofleet", "workspace"), "~/.nanofleet/workspace"},
		{"under home", filepath.Join(home, "bots", "ws"), "~/bots/ws"},
		{"elsewhere", filepath.Join(elsewhere, "ws"), filepath.Join(elsewhere, "ws")},
		{"relative", "rel-ws", filepath.Join(elsewhere, "rel-ws")},
		{"with a quote", filepath.Join(elsewhere, `my "ws"`), filepath.Join(elsewhere, `my "ws"`)},
	}
	t.Chdir(elsewhere)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "config.json")
			if _, err := onboard.Write(cfg, tt.workspace, false); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			f := config.Defaults()
			if err := config.Parse(f, data, func(string) string { return "" }); err != nil {
				t.Fatalf("the config does not load: %v\n%s", err, data)
			}
			if got := f.Agents.Defaults.Workspace; got != tt.want {
				t.Errorf("the config names workspace %q, want %q", got, tt.want)
			}
			ws, err := config.ExpandHome(f.Agents.Defaults.Workspace)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(ws, "SOUL.md")); err != nil {
				t.Errorf("no template where the config points: %v", err)
			}
		})
	}
}

// TestWriteWithOwner: under root, what onboard creates in the workspace
// belongs to the user exec runs as, so that exec can edit memory/.
func TestWriteWithOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	if _, err := onboard.Write(filepath.Join(dir, "config.json"), ws, false, onboard.WithOwner(65534, 65533)); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{".", "memory", "memory/MEMORY.md", "AGENTS.md", "skills/weather/SKILL.md"} {
		fi, err := os.Lstat(filepath.Join(ws, rel))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || st.Gid != 65533 {
			t.Errorf("%s owned by %d:%d, want 65534:65533", rel, st.Uid, st.Gid)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "config.json")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("config file not kept root's (it holds API keys): %v", err)
	}
}
