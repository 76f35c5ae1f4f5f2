package profile_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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

func TestSeedAndWatch(t *testing.T) {
	ctx := context.Background()
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
	if n, _ := profile.Seed(ctx, kv, "default", ws); n != 0 {
		t.Errorf("re-seeding unchanged files wrote %d entries", n)
	}

	cache, err := profile.Watch(ctx, kv)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Stop()
	<-cache.Ready()
	snap := cache.Get("default")
	if snap.Files["SOUL.md"] != "Be kind." || len(snap.Skills) != 1 || snap.Skills[0].Description != "forecast" {
		t.Fatalf("snapshot = %+v", snap)
	}

	// An edit reaches the cache.
	if _, err := kv.Put(ctx, profile.FileKey("default", "SOUL.md"), []byte("Be brief.")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for cache.Get("default").Files["SOUL.md"] != "Be brief." {
		if time.Now().After(deadline) {
			t.Fatal("edit never reached the cache")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
