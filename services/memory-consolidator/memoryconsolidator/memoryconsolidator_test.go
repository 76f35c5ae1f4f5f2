package memoryconsolidator_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/memtest"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/memoryconsolidator"
)

func parse(t *testing.T, doc string) *config.File {
	t.Helper()
	f := config.Defaults()
	if err := config.Parse(f, []byte(doc), func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestConfigs(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		ok    bool
		check func(t *testing.T, c memoryconsolidator.Section, dreamOn bool)
	}{
		{"defaults", `{}`, true, func(t *testing.T, c memoryconsolidator.Section, dreamOn bool) {
			if !dreamOn || c.Scope != memory.KindAgent {
				t.Errorf("defaults: dream %v, scope %q", dreamOn, c.Scope)
			}
		}},
		{"everything", `{"memory": {"scope": "user", "consolidateShare": 0.6,
			"consolidator": {"slots": 2, "ackWaitSeconds": 30, "chunkTokens": 8000},
			"dream": {"every": "30m", "maxEntries": 50}, "sync": {"pollSeconds": 5}}}`, true,
			func(t *testing.T, c memoryconsolidator.Section, dreamOn bool) {
				if c.Scope != memory.KindUser || c.Consolidator.Slots != 2 || c.Dream.Every != "30m" || c.Sync.PollSeconds != 5 || !dreamOn {
					t.Errorf("section = %+v", c)
				}
			}},
		{"dream off", `{"memory": {"dream": {"enabled": false}}}`, true, func(t *testing.T, _ memoryconsolidator.Section, dreamOn bool) {
			if dreamOn {
				t.Error("dream still on")
			}
		}},
		{"cron", `{"memory": {"dream": {"cron": "0 0 3 * * *", "timeZone": "Europe/Lisbon"}}}`, true, nil},
		{"unknown key", `{"memory": {"dream": {"evry": "1h"}}}`, false, nil},
		{"bad interval", `{"memory": {"dream": {"every": "soon"}}}`, false, nil},
		{"bad scope", `{"memory": {"scope": "team"}}`, false, nil},
		{"bad slots", `{"memory": {"consolidator": {"slots": -1}}}`, false, nil},
	}
	for _, tt := range tests {
		_, _, dreamOn, sec, err := memoryconsolidator.Configs(parse(t, tt.doc), "id")
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if err != nil && !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%s: %v does not match config.ErrInvalid", tt.name, err)
		}
		if err == nil && tt.check != nil {
			tt.check(t, sec, dreamOn)
		}
	}
	// The worker reads the same section into memory.Config.
	var mc memory.Config
	if err := parse(t, tests[1].doc).Section("memory", &mc); err != nil || mc.Scope != memory.KindUser {
		t.Errorf("worker's view: %+v, %v", mc, err)
	}
}

func TestServiceConsolidatesAndSyncs(t *testing.T) {
	_, b := memtest.Start(t)
	model := llmtest.NewServer(t)
	model.Handle(memtest.Consolidate)
	ws := t.TempDir()
	ctx := t.Context()
	s, err := memoryconsolidator.New(ctx, parse(t, `{"memory": {"sync": {"pollSeconds": 1}}}`), memoryconsolidator.Deps{
		Bus: b, ID: "c1", Workspace: ws, Model: memtest.Model(t, model),
	}, memoryconsolidator.WithLogger(memtest.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	svctest.Run(t, s.Run)
	sessions, _ := session.Open(ctx, b)
	seq, err := sessions.Append(ctx, "cli:s", &nanofleetv1.TurnRecord{TurnId: "t", Messages: []*nanofleetv1.ChatMessage{
		{Role: "user", Content: "FACT: the wifi password is hunter2."},
	}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := memory.PublishRequest(ctx, b, &nanofleetv1.ConsolidationRequest{SessionKey: "cli:s", FromSeq: 1, ToSeq: seq, Scope: memory.AgentScope("default").Key(), Reason: "new"}); err != nil {
		t.Fatal(err)
	}
	memtest.WaitCursor(t, b, "cli:s", seq, 10*time.Second)
	p := filepath.Join(ws, "memory", "MEMORY.md")
	bustest.Eventually(t, 10*time.Second, func() error {
		data, _ := os.ReadFile(p)
		if !strings.Contains(string(data), "the wifi password is hunter2") {
			return fmt.Errorf("MEMORY.md in the workspace = %q", data)
		}
		return nil
	})
	if err := s.Dream.Schedule(ctx); err != nil { // idempotent; Run may not be there yet
		t.Fatal(err)
	}
	jobs, err := memory.ListJobs(ctx, b)
	if err != nil || len(jobs) != 1 || jobs[0].Schedule != "@every 2h0m0s" {
		t.Errorf("jobs = %v, %v", jobs, err)
	}
}

// TestRefusesABroadWorkspace: the file sync writes in the workspace it
// is given, as root; a system directory is refused at start.
func TestRefusesABroadWorkspace(t *testing.T) {
	_, b := memtest.Start(t)
	model := llmtest.NewServer(t)
	_, err := memoryconsolidator.New(t.Context(), parse(t, `{}`), memoryconsolidator.Deps{
		Bus: b, ID: "c1", Workspace: "/etc", Model: memtest.Model(t, model),
	})
	if err == nil || !strings.Contains(err.Error(), "--workspace: /etc is a system directory") {
		t.Fatalf("New with workspace /etc: %v, want refused", err)
	}
}
