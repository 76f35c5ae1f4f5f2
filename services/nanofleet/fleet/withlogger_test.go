package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/embeddednats"
	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/schedule"
	"github.com/nanofleet/nanofleet/pkg/storeguard"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/pkg/toolclient"
	"github.com/nanofleet/nanofleet/services/agent-worker/agent"
	"github.com/nanofleet/nanofleet/services/agent-worker/agentworker"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channelgateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/openaiapi"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram"
	"github.com/nanofleet/nanofleet/services/channel-gateway/webchat"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/memoryconsolidator"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
	"github.com/nanofleet/nanofleet/services/tool-runner/mcp"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
)

// TestWithLoggerNil: every component built with WithLogger(nil) logs
// nothing instead of panicking — in New, where most derive their logger
// (and the assemblies hand it to their parts), and, for those that run,
// in Run's start and stop. The adapters' options derive theirs when
// applied, so they are applied alone.
func TestWithLoggerNil(t *testing.T) {
	model := llmtest.NewServer(t)
	file := loadConfig(t, testConfig(t, model.URL(), nil))
	b := bustest.StartJetStream(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := bus.Provision(ctx, b, svc.Layout(file), fleet.Assets); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	getenv := func(string) string { return "" }
	// run is what a row runs after building, nil when it does not run.
	type run func(context.Context) error
	tests := []struct {
		name  string
		build func(context.Context) (run, error)
	}{
		{"embeddednats.Start", func(context.Context) (run, error) {
			e, err := embeddednats.Start(embeddednats.Config{StoreDir: t.TempDir(), NoListen: true}, embeddednats.WithLogger(nil))
			if err == nil {
				e.Shutdown()
			}
			return nil, err
		}},
		{"fleet.Start", func(ctx context.Context) (run, error) {
			// The whole all-in-one, which hands the logger to every part.
			f, err := fleet.Start(ctx, fleet.Options{
				File: file, Getenv: getenv, DataDir: t.TempDir(), Workspace: t.TempDir(), Gateway: true, GatewayListen: "127.0.0.1:0",
			}, fleet.WithLogger(nil))
			if err == nil {
				f.Stop()
			}
			return nil, err
		}},
		{"profile.Seed", func(ctx context.Context) (run, error) {
			// A symlinked bootstrap file is refused with a warning.
			dir := t.TempDir()
			if err := os.Symlink(filepath.Join(dir, "elsewhere"), filepath.Join(dir, "AGENTS.md")); err != nil {
				return nil, err
			}
			kv, err := b.KV(ctx, bus.BucketProfile)
			if err != nil {
				return nil, err
			}
			_, err = profile.Seed(ctx, kv, "nil-logger", dir, profile.WithEditable(true), profile.WithLogger(nil))
			return nil, err
		}},
		{"llm.New", func(context.Context) (run, error) {
			_, err := llm.New(llm.Config{APIKey: "k", Model: "m"}, llm.WithLogger(nil))
			return nil, err
		}},
		{"toolclient.New", func(context.Context) (run, error) {
			_, err := toolclient.New(b, toolclient.WithLogger(nil))
			return nil, err
		}},
		{"storeguard.New", func(ctx context.Context) (run, error) {
			g, err := storeguard.New(storeguard.Config{Dir: t.TempDir()}, prometheus.NewRegistry(), nil, storeguard.WithLogger(nil))
			if err != nil {
				return nil, err
			}
			return g.Run, nil
		}},
		{"memory.New", func(ctx context.Context) (run, error) {
			_, err := memory.New(ctx, memory.DefaultConfig(), b, memory.WithLogger(nil))
			return nil, err
		}},
		{"schedule.NewRelay", func(ctx context.Context) (run, error) {
			r, err := schedule.NewRelay(ctx, b, schedule.WithLogger(nil))
			if err != nil {
				return nil, err
			}
			return r.Run, nil
		}},
		{"agent.New", func(context.Context) (run, error) {
			model, err := llm.New(llm.Config{APIKey: "k", Model: "m"})
			if err != nil {
				return nil, err
			}
			_, err = agent.New(agent.Config{MaxIterations: 1, MaxTokens: 100}, model, agent.WithLogger(nil))
			return nil, err
		}},
		{"agentworker.New", func(ctx context.Context) (run, error) {
			tools, err := toolclient.New(b)
			if err != nil {
				return nil, err
			}
			w, err := agentworker.New(ctx, file, agentworker.Deps{Bus: b, Getenv: getenv, ID: "nil-log", Workspace: ws, Tools: tools}, agentworker.WithLogger(nil))
			if err != nil {
				return nil, err
			}
			t.Cleanup(w.Close)
			return w.Run, nil
		}},
		{"memoryconsolidator.New", func(ctx context.Context) (run, error) {
			s, err := memoryconsolidator.New(ctx, file, memoryconsolidator.Deps{Bus: b, Getenv: getenv, ID: "nil-log", Workspace: ws}, memoryconsolidator.WithLogger(nil))
			if err != nil {
				return nil, err
			}
			return s.Run, nil
		}},
		{"channelgateway.New", func(ctx context.Context) (run, error) {
			gw, err := channelgateway.New(ctx, file, channelgateway.Deps{Bus: b, Listen: "127.0.0.1:0"}, channelgateway.WithLogger(nil))
			if err != nil {
				return nil, err
			}
			return gw.Run, nil
		}},
		{"gateway.New", func(context.Context) (run, error) {
			g, err := gateway.New(gateway.DefaultConfig(), b, nil, gateway.WithLogger(nil))
			if err != nil {
				return nil, err
			}
			return g.Run, nil
		}},
		{"access.Open", func(ctx context.Context) (run, error) {
			_, err := access.Open(ctx, b, access.WithLogger(nil))
			return nil, err
		}},
		{"runner.New", func(context.Context) (run, error) {
			cfg, err := runner.FromFile(file, filepath.Join(t.TempDir(), "ws"))
			if err != nil {
				return nil, err
			}
			r, err := runner.New(cfg, b, runner.WithLogger(nil))
			if err != nil {
				return nil, err
			}
			return r.Run, nil
		}},
		{"mcp.New", func(context.Context) (run, error) {
			// New logs the disabled server.
			m, err := mcp.New(mcp.Options{Servers: map[string]mcp.ServerConfig{"off": {Command: "true", Disabled: true}}, Sandbox: sandbox.DefaultConfig()}, mcp.WithLogger(nil))
			if err != nil {
				return nil, err
			}
			return m.Run, nil
		}},
		{"sandbox.NewExecutor", func(context.Context) (run, error) {
			cfg := sandbox.DefaultConfig()
			cfg.Sandbox = sandbox.ModeNone
			_, err := sandbox.NewExecutor(cfg, sandbox.WithLogger(nil))
			return nil, err
		}},
		{"telegram.WithLogger", func(context.Context) (run, error) {
			return nil, telegram.WithLogger(nil)(&telegram.Adapter{})
		}},
		{"slack.WithLogger", func(context.Context) (run, error) { return nil, slack.WithLogger(nil)(&slack.Adapter{}) }},
		{"discord.WithLogger", func(context.Context) (run, error) { return nil, discord.WithLogger(nil)(&discord.Adapter{}) }},
		{"feishu.WithLogger", func(context.Context) (run, error) { return nil, feishu.WithLogger(nil)(&feishu.Adapter{}) }},
		{"dingtalk.WithLogger", func(context.Context) (run, error) { return nil, dingtalk.WithLogger(nil)(&dingtalk.Adapter{}) }},
		{"whatsapp.WithLogger", func(context.Context) (run, error) { return nil, whatsapp.WithLogger(nil)(&whatsapp.Adapter{}) }},
		{"webchat.WithLogger", func(context.Context) (run, error) { webchat.WithLogger(nil)(&webchat.Server{}); return nil, nil }},
		{"openaiapi.WithLogger", func(context.Context) (run, error) { openaiapi.WithLogger(nil)(&openaiapi.Server{}); return nil, nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := noPanic(func() error {
				run, err := tt.build(ctx)
				if err != nil || run == nil {
					return err
				}
				return runBriefly(ctx, run)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// noPanic calls f and turns a panic into an error.
func noPanic(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f()
}

// runBriefly runs a component whose context has already ended: it starts
// and stops at once. Its error, if any, is not the point.
func runBriefly(ctx context.Context, run func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = run(ctx)
	}()
	select {
	case <-ran:
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("Run did not return within 30s of its context ending")
	}
}
