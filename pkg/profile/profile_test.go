package profile_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/profile"
)

func TestParseSkill(t *testing.T) {
	tests := []struct {
		name, text string
		want       profile.Skill
	}{
		{"no front matter", "Do things.", profile.Skill{Dir: "d", Name: "d", Body: "Do things."}},
		{"front matter", "---\nname: weather\ndescription: Get weather\nalways: true\nrequires:\n  bins: [curl]\n  env: [KEY]\n---\nUse curl.",
			profile.Skill{Dir: "d", Name: "weather", Description: "Get weather", Always: true, Requires: profile.Requirements{Bins: []string{"curl"}, Env: []string{"KEY"}}, Body: "Use curl."}},
		{"broken yaml keeps body", "---\nname: [\n---\nbody", profile.Skill{Dir: "d", Name: "d", Body: "---\nname: [\n---\nbody"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := profile.ParseSkill("d", tt.text)
			if got.Name != tt.want.Name || got.Description != tt.want.Description || got.Always != tt.want.Always || got.Body != tt.want.Body ||
				len(got.Requires.Bins) != len(tt.want.Requires.Bins) || len(got.Requires.Env) != len(tt.want.Requires.Env) {
				t.Errorf("ParseSkill = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAvailable(t *testing.T) {
	s := profile.Skill{Requires: profile.Requirements{Bins: []string{"nope"}, Env: []string{"K"}}}
	missing := func(string) (string, error) { return "", errors.New("not found") }
	found := func(string) (string, error) { return "/bin/x", nil }
	if s.Available(missing, func(string) string { return "v" }) {
		t.Error("available without its binary")
	}
	if s.Available(found, func(string) string { return "" }) {
		t.Error("available without its env var")
	}
	if !s.Available(found, func(string) string { return "v" }) {
		t.Error("unavailable with everything present")
	}
}

// TestSkillRequirementsBounded: a SKILL.md repeating a requirement is
// checked once for it, and one asking for more than MaxRequirements is
// not offered, without a look at PATH: each turn checks every skill, and
// a model-written file listing "sh" 174,000 times made each turn 3 s
// longer.
func TestSkillRequirementsBounded(t *testing.T) {
	lookups := 0
	lookPath := func(string) (string, error) { lookups++; return "/bin/sh", nil }
	getenv := func(string) string { return "v" }
	repeated := profile.ParseSkill("d", "---\nrequires:\n  bins: ["+strings.Repeat("sh, ", 10000)+"sh]\nmetadata:\n  requires:\n    bins: [sh]\n---\nbody")
	if ok := repeated.Available(lookPath, getenv); !ok || lookups != 1 {
		t.Errorf("a requirement repeated 10,002 times: available %t after %d lookups, want true after 1", ok, lookups)
	}
	var many []string
	for i := range profile.MaxRequirements + 1 {
		many = append(many, fmt.Sprint("bin", i))
	}
	lookups = 0
	tooMany := profile.ParseSkill("d", "---\nrequires:\n  bins: ["+strings.Join(many, ", ")+"]\n---\nbody")
	if ok := tooMany.Available(lookPath, getenv); ok || lookups != 0 {
		t.Errorf("%d requirements: available %t after %d lookups, want false after 0", len(many), ok, lookups)
	}
}

func TestSeedAndWatch(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t)
	kv, err := b.KV(ctx, bus.BucketProfile)
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(ws, "SOUL.md"), []byte("Be kind."), 0o644))
	must(os.MkdirAll(filepath.Join(ws, "skills", "weather"), 0o755))
	must(os.WriteFile(filepath.Join(ws, "skills", "weather", "SKILL.md"), []byte("---\nname: weather\ndescription: forecast\n---\nbody"), 0o644))

	n, err := profile.Seed(ctx, kv, "default", ws)
	if err != nil || n != 2 {
		t.Fatalf("Seed = %d, %v; want 2 entries", n, err)
	}
	if n, _ := profile.Seed(ctx, kv, "default", ws, profile.WithEditable(true)); n != 0 {
		t.Errorf("re-seeding unchanged files wrote %d entries", n)
	}

	cache, err := profile.Watch(ctx, kv)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Stop()
	bustest.Receive(t, cache.Ready(), 10*time.Second)
	snap := cache.Get("default")
	if snap.Files["SOUL.md"] != "Be kind." || len(snap.Skills) != 1 || snap.Skills[0].Description != "forecast" {
		t.Fatalf("snapshot = %+v", snap)
	}

	// An edit reaches the cache.
	if _, err := kv.Put(ctx, profile.FileKey("default", "SOUL.md"), []byte("Be brief.")); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 5*time.Second, func() error {
		if got := cache.Get("default").Files["SOUL.md"]; got != "Be brief." {
			return fmt.Errorf("edit never reached the cache: SOUL.md = %q", got)
		}
		return nil
	})
}

// TestSeedTrustsNoSessionWrite: the workspace seeds the profile once; after
// that a session's change to it (a symlink to a host file, a new or
// replaced bootstrap file) is never read back unless the operator made the
// profile editable, and even then a symlink or hard link is not followed.
func TestSeedTrustsNoSessionWrite(t *testing.T) {
	const secret = "apiKey: sk-HOST-SECRET"
	tests := []struct {
		name     string
		editable bool
		change   func(t *testing.T, ws, host string)
		want     map[string]string // bucket files after the second seed
	}{
		{"new file is not read back", false, func(t *testing.T, ws, _ string) {
			write(t, filepath.Join(ws, "TOOLS.md"), "injected")
		}, map[string]string{"AGENTS.md": "Be good.", "SOUL.md": "Be kind."}},
		{"replaced file is not read back", false, func(t *testing.T, ws, _ string) {
			write(t, filepath.Join(ws, "AGENTS.md.new"), "injected")
			if err := os.Rename(filepath.Join(ws, "AGENTS.md.new"), filepath.Join(ws, "AGENTS.md")); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"AGENTS.md": "Be good.", "SOUL.md": "Be kind."}},
		{"editable: a changed file is read back", true, func(t *testing.T, ws, _ string) {
			write(t, filepath.Join(ws, "SOUL.md"), "Be brief.")
		}, map[string]string{"AGENTS.md": "Be good.", "SOUL.md": "Be brief."}},
		{"editable: symlink to a host file is not followed", true, func(t *testing.T, ws, host string) {
			if err := os.Remove(filepath.Join(ws, "AGENTS.md")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(host, filepath.Join(ws, "AGENTS.md")); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"AGENTS.md": "Be good.", "SOUL.md": "Be kind."}},
		{"editable: hard link to a host file is not read", true, func(t *testing.T, ws, host string) {
			if err := os.Remove(filepath.Join(ws, "SOUL.md")); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(host, filepath.Join(ws, "SOUL.md")); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"AGENTS.md": "Be good.", "SOUL.md": "Be kind."}},
		{"editable: symlinked skills directory is not followed", true, func(t *testing.T, ws, host string) {
			if err := os.RemoveAll(filepath.Join(ws, "skills")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Dir(host), filepath.Join(ws, "skills")); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"AGENTS.md": "Be good.", "SOUL.md": "Be kind."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			b := bustest.StartJetStream(t)
			kv, err := b.KV(ctx, bus.BucketProfile)
			if err != nil {
				t.Fatal(err)
			}
			ws, hostDir := t.TempDir(), t.TempDir()
			host := filepath.Join(hostDir, "config.json")
			write(t, host, secret)
			write(t, filepath.Join(ws, "AGENTS.md"), "Be good.")
			write(t, filepath.Join(ws, "SOUL.md"), "Be kind.")
			if n, err := profile.Seed(ctx, kv, "default", ws); err != nil || n != 2 {
				t.Fatalf("first Seed = %d, %v", n, err)
			}
			tt.change(t, ws, host)
			if _, err := profile.Seed(ctx, kv, "default", ws, profile.WithEditable(tt.editable)); err != nil {
				t.Fatalf("second Seed: %v", err)
			}
			cache, err := profile.Watch(ctx, kv)
			if err != nil {
				t.Fatal(err)
			}
			defer cache.Stop()
			select {
			case <-cache.Ready():
			case <-time.After(10 * time.Second):
				t.Fatal("profile cache not ready")
			}
			snap := cache.Get("default")
			if len(snap.Files) != len(tt.want) || len(snap.Skills) != 0 {
				t.Errorf("profile = %v, %d skills; want %v", snap.Files, len(snap.Skills), tt.want)
			}
			for name, want := range tt.want {
				if snap.Files[name] != want {
					t.Errorf("%s = %q, want %q", name, snap.Files[name], want)
				}
			}
			if got, _ := os.ReadFile(host); string(got) != secret {
				t.Errorf("host file changed: %q", got)
			}
		})
	}
}

// TestSeedUpgradedBucket: a bucket from before the seeded mark that holds
// the agent's files counts as seeded.
func TestSeedUpgradedBucket(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t)
	kv, err := b.KV(ctx, bus.BucketProfile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, profile.FileKey("default", "SOUL.md"), []byte("old")); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	write(t, filepath.Join(ws, "SOUL.md"), "from a session")
	if n, err := profile.Seed(ctx, kv, "default", ws); err != nil || n != 0 {
		t.Fatalf("Seed = %d, %v; want nothing written", n, err)
	}
	if e, err := kv.Get(ctx, profile.FileKey("default", "SOUL.md")); err != nil || string(e.Value()) != "old" {
		t.Fatalf("SOUL.md in the bucket = %v, %v", e, err)
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadFile: a stored file is read with its revision and time; a
// missing or deleted key is an empty file at revision 0, not an error.
func TestReadFile(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	kv, err := b.KV(ctx, bus.BucketProfile)
	if err != nil {
		t.Fatal(err)
	}
	soul := profile.FileKey("default", "SOUL.md")
	rev, err := kv.Put(ctx, soul, []byte("I am kind.\n"))
	if err != nil {
		t.Fatal(err)
	}
	gone := profile.FileKey("default", "USER.md")
	if _, err := kv.Put(ctx, gone, []byte("Name: Ada\n")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		key     string
		content string
		rev     uint64
	}{
		{"stored", soul, "I am kind.\n", rev},
		{"missing", profile.FileKey("default", "TOOLS.md"), "", 0},
		{"deleted", gone, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := profile.ReadFile(ctx, kv, tt.key)
			if err != nil {
				t.Fatalf("ReadFile(%s): %v", tt.key, err)
			}
			if f.Content != tt.content || f.Rev != tt.rev || f.Written.IsZero() != (tt.rev == 0) {
				t.Errorf("ReadFile(%s) = %q at %d written %v; want %q at %d", tt.key, f.Content, f.Rev, f.Written, tt.content, tt.rev)
			}
		})
	}
}
