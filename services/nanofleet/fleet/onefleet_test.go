package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/fleetdir"
	"github.com/nanofleet/nanofleet/pkg/syncbuf"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet/fleettest"
)

// TestOneFleetPerDataDirectory follows the README with a fresh HOME:
// `nanofleet run`, then `nanofleet agent -m` and `status` as other
// processes. The agent joins the running fleet (its turn is in that
// fleet's history) instead of opening the store a second time; a second
// `run` on the same data directory exits at once naming the first; the
// fleet's NATS refuses a client without its credentials.
func TestOneFleetPerDataDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	bins := fleettest.Build(t, "nanofleet")
	llm := answering(t, "hi, ")
	home := t.TempDir()
	dataDir := filepath.Join(home, ".nanofleet", "data")
	web, metrics := fmt.Sprintf("127.0.0.1:%d", bustest.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", bustest.FreePort(t))
	cfg := testConfig(t, llm.URL(), map[string]any{
		"channels":      map[string]any{"web": map[string]any{"listen": web}},
		"observability": map[string]any{"listen": metrics},
	})
	writeJSON(t, filepath.Join(home, ".nanofleet", "config.json"), cfg)
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	// No --config, --data, --nats, --listen or --http: the defaults under
	// HOME and the config's listeners, as a user runs it.
	runArgs := []string{"run", "--log-level", "warn"}

	aio := fleettest.Start(t, "nanofleet run", bins.Path("nanofleet"), env, runArgs...)
	aio.WaitOutput(t, "nanofleet is running", time.Minute)
	// The start-up text names every address, from the config.
	for _, want := range []string{
		"web chat: http://" + web + "/", "dashboard: http://" + web + "/dashboard",
		"OpenAI-compatible API: http://" + web + "/v1 (api key ", "channels.api.token",
		"metrics: http://" + metrics + "/metrics", "NATS: nats://127.0.0.1:", filepath.Join(dataDir, "nats-credentials.json"),
	} {
		if !strings.Contains(aio.Output(), want) {
			t.Errorf("start-up text lacks %q:\n%s", want, aio.Output())
		}
	}
	for _, u := range []string{"http://" + metrics + "/healthz", "http://" + web + "/"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		resp.Body.Close()
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	t.Run("second run exits at once naming the first", func(t *testing.T) {
		// The first run holds the data directory all along: a second run
		// that waited for it would be killed at its deadline (no exit
		// code 1), so its own exit 1 before the deadline is the proof.
		runCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		out, err := runCLI(runCtx, bins.Path("nanofleet"), env, runArgs...)
		var exit interface{ ExitCode() int }
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("second run: err %v, want exit code 1\n%s", err, out)
		}
		if runCtx.Err() != nil {
			t.Fatalf("second run ended at the test's deadline, not by giving up itself:\n%s", out)
		}
		for _, want := range []string{"already runs on " + dataDir, fmt.Sprintf("nanofleet run (pid %d", aio.Pid())} {
			if !strings.Contains(out, want) {
				t.Errorf("second run's output lacks %q:\n%s", want, out)
			}
		}
	})

	out, err := runCLI(ctx, bins.Path("nanofleet"), env, "agent", "-m", "Hello")
	if err != nil {
		t.Fatalf("nanofleet agent: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(out); got != "hi, Hello" {
		t.Fatalf("agent printed %q", got)
	}

	// The turn is in the running fleet's history: ask that fleet directly.
	running := fleettest.FleetOn(t, dataDir)
	b := running.Connect(t, bustest.TestLayout())
	client, err := fleet.NewClient(ctx, b, "cli")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	replies, err := client.Ask(ctx, fleet.Request{ChatID: "direct", Text: "/history 10"})
	if err != nil {
		t.Fatal(err)
	}
	hist, err := fleet.Final(replies)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"user: Hello", "assistant: hi, Hello"} {
		if !strings.Contains(hist.GetContent(), want) {
			t.Errorf("running fleet's history lacks %q:\n%s", want, hist.GetContent())
		}
	}

	out, err = runCLI(ctx, bins.Path("nanofleet"), env, "status")
	if err != nil {
		t.Fatalf("nanofleet status: %v\n%s", err, out)
	}
	if !strings.Contains(out, "agent-worker") || !strings.Contains(out, "NANOFLEET_HIST") {
		t.Errorf("status did not show the running fleet:\n%s", out)
	}

	t.Run("a client without credentials is refused", func(t *testing.T) {
		u, err := url.Parse(running.URL)
		if err != nil {
			t.Fatal(err)
		}
		u.User = nil
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		b, err := bus.Connect(cctx, bus.Config{URL: u.String(), Name: "intruder"})
		if err == nil {
			b.NC.Close()
			t.Fatal("the fleet's NATS accepted a client without credentials")
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("err = %v, want an authorization error", err)
		}
		st, err := os.Stat(filepath.Join(dataDir, "nats-credentials.json"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("credentials file mode %v, want 0600", st.Mode().Perm())
		}
	})
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRunOnATakenPort: with its NATS port taken by another process (a
// NATS server of the user's, or a fleet with another data directory), the
// all-in-one fails at once saying so and naming the keys that fix it,
// instead of waiting out the server's 30 s readiness timeout.
func TestRunOnATakenPort(t *testing.T) {
	taken := bustest.TakenPort(t)
	cfg := testConfig(t, "http://127.0.0.1:1/v1", nil)
	cfg["nats"] = map[string]any{"port": taken.Addr().(*net.TCPAddr).Port}
	f, err := fleet.Start(t.Context(), fleet.Options{
		File: loadConfig(t, cfg), Getenv: func(string) string { return "" }, DataDir: t.TempDir(), Workspace: t.TempDir(),
		Listen: true, Credentials: fleetdir.Credentials{User: "nanofleet", Password: "s3cret"},
	})
	if err == nil {
		f.Stop()
		t.Fatal("started on a taken port")
	}
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "nats.port") || !strings.Contains(err.Error(), "nats.url") {
		t.Errorf("error %q, want address in use naming nats.port and nats.url", err)
	}
}

// TestFailedStartStopsItsParts: when a part cannot start (here the
// gateway, its port taken), the parts already running stop before the
// fleet's connection closes, instead of failing on it and logging errors
// that hide the one that matters.
func TestFailedStartStopsItsParts(t *testing.T) {
	taken := bustest.TakenPort(t)
	var logs syncbuf.Buffer
	f, err := fleet.Start(t.Context(), fleet.Options{
		File: loadConfig(t, testConfig(t, "http://127.0.0.1:1/v1", nil)), Getenv: func(string) string { return "" },
		DataDir: t.TempDir(), Workspace: t.TempDir(), Gateway: true, GatewayListen: taken.Addr().String(),
	}, fleet.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err == nil {
		f.Stop()
		t.Fatal("started with the gateway's port taken")
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("error %q, want address in use", err)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a failed start logged errors besides its own:\n%s", logs.String())
	}
}

// TestStopRightAfterStartIsQuiet: a fleet stopped as soon as it started
// (its caller failed next, say) stops its parts as a stop, not as
// failures: the parts that were still opening their buckets log nothing.
func TestStopRightAfterStartIsQuiet(t *testing.T) {
	var logs syncbuf.Buffer
	f, err := fleet.Start(t.Context(), fleet.Options{
		File: loadConfig(t, testConfig(t, "http://127.0.0.1:1/v1", nil)), Getenv: func(string) string { return "" },
		DataDir: t.TempDir(), Workspace: t.TempDir(), Gateway: true, GatewayListen: "127.0.0.1:0",
	}, fleet.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		t.Fatal(err)
	}
	f.Stop()
	if err := f.Err(); err != nil {
		t.Errorf("a stop right after the start ended with %v", err)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a stop right after the start logged errors:\n%s", logs.String())
	}
}
