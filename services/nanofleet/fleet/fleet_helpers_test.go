package fleet_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// testConfig is a config pointing the fleet at the fake model, with short
// timers so that crash recovery happens within a test's patience.
func testConfig(t testing.TB, modelURL string, extra map[string]any) map[string]any {
	t.Helper()
	cfg := map[string]any{
		"agents":    map[string]any{"defaults": map[string]any{"model": "fake-model"}},
		"providers": map[string]any{"custom": map[string]any{"apiKey": "test-key", "apiBase": modelURL}},
		"nats":      map[string]any{"leaseTtlSeconds": 3, "port": -1},
		"worker":    map[string]any{"ackWaitSeconds": 3, "modelRetries": 2},
		"tools":     map[string]any{"exec": map[string]any{"sandbox": "none"}},
	}
	for k, v := range extra {
		cfg[k] = v
	}
	return cfg
}

func loadConfig(t testing.TB, cfg map[string]any) *config.File {
	t.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := config.Defaults()
	if err := config.Parse(f, data, func(string) string { return "" }); err != nil {
		t.Fatalf("test config: %v", err)
	}
	return f
}

type testFleet struct {
	*fleet.Fleet
	client *fleet.Client
	llm    *llmtest.Server
	ws     string
}

// startFleet runs an in-process fleet with an embedded NATS in dataDir.
func startFleet(t testing.TB, llm *llmtest.Server, dataDir string, workers int) *testFleet {
	t.Helper()
	ws := t.TempDir()
	return startFleetIn(t, llm, dataDir, ws, workers)
}

func startFleetIn(t testing.TB, llm *llmtest.Server, dataDir, ws string, workers int) *testFleet {
	t.Helper()
	return startFleetWith(t, llm, dataDir, ws, workers, nil)
}

// startFleetWith starts a fleet whose config has extra sections merged in.
func startFleetWith(t testing.TB, llm *llmtest.Server, dataDir, ws string, workers int, extra map[string]any) *testFleet {
	t.Helper()
	return startFleetFile(t, llm, loadConfig(t, testConfig(t, llm.URL(), extra)), dataDir, ws, workers, 30*time.Second)
}

// startFleetFile starts a fleet on file, given within to start, with a
// client.
func startFleetFile(t testing.TB, llm *llmtest.Server, file *config.File, dataDir, ws string, workers int, within time.Duration) *testFleet {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	f, err := fleet.Start(ctx, fleet.Options{
		File: file, Getenv: func(string) string { return "" },
		DataDir: dataDir, Workspace: ws, Workers: workers,
	}, fleet.WithLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		t.Fatalf("start fleet: %v", err)
	}
	c, err := fleet.NewClient(ctx, f.Bus, "test")
	if err != nil {
		t.Fatal(err)
	}
	tf := &testFleet{Fleet: f, client: c, llm: llm, ws: ws}
	t.Cleanup(tf.stop)
	return tf
}

func (tf *testFleet) stop() {
	if tf.client != nil {
		tf.client.Close()
		tf.client = nil
		tf.Fleet.Stop()
	}
}
