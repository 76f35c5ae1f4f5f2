package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/agent"
	"github.com/nanofleet/nanofleet/services/agent-worker/agentworker"
	"github.com/nanofleet/nanofleet/services/agent-worker/prompt"
	"github.com/nanofleet/nanofleet/services/agent-worker/worker"
	"github.com/nanofleet/nanofleet/services/tool-runner/runner"
	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
)

// baseline runs sc's load through the agent loop alone: the same model
// provider, fake model, prompt builder and tools, with the session
// history kept in memory — no NATS, no leases, no commits.
func (r *driver) baseline(ctx context.Context, sc scenario, fleetRes Result) (*Baseline, error) {
	bed, err := r.scenarioBed("base-", sc)
	if err != nil {
		return nil, err
	}
	defer bed.close()
	file, ws := bed.file, bed.ws
	wcfg, sec, err := agentworker.ConfigFrom(file, "baseline", ws)
	if err != nil {
		return nil, err
	}
	client, _, err := agentworker.Model(file, noEnv, sec.ModelRetries, r.fleetLog)
	if err != nil {
		return nil, err
	}
	loop, err := agent.New(wcfg.Loop, client, agent.WithLogger(r.fleetLog))
	if err != nil {
		return nil, err
	}
	ts, err := newBaselineTools(ws)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	hist := map[string][]session.Turn{}
	turn := func(ctx context.Context, chat string, n int) error {
		mu.Lock()
		h := hist[chat]
		mu.Unlock()
		key := "bench:" + chat
		p := prompt.Build(prompt.Input{
			Now: time.Now(), Location: wcfg.Location, Workspace: ws, SessionKey: key, Channel: "bench",
			History: h, BudgetTokens: wcfg.ContextWindowTokens - wcfg.Loop.MaxTokens,
		})
		user := &nanofleetv1.ChatMessage{Role: "user", Content: fmt.Sprintf("message %d", n), CreatedAt: timestamppb.Now()}
		res, err := loop.Run(ctx, agent.Turn{Model: wcfg.Model, Prompt: p, Messages: []*nanofleetv1.ChatMessage{user}}, ts, agent.Hooks{})
		if err != nil {
			return err
		}
		mu.Lock()
		hist[chat] = append(h, session.Turn{Seq: uint64(len(h) + 1), Record: &nanofleetv1.TurnRecord{SessionKey: key, Messages: res.Messages}})
		mu.Unlock()
		return nil
	}
	if err := warmUp(ctx, turn, sc); err != nil {
		return nil, err
	}
	meter := startCPU(os.Getpid())
	s := sc.load.run(ctx, turn)
	_, other := meter.stop()
	b := &Baseline{
		OtherCPUPercent: other,
		TurnsPerS:       float64(len(s.Latencies)) / s.Elapsed.Seconds(),
		LatencyMs:       percentiles(s.Latencies),
		Errors:          s.Errors,
	}
	if b.TurnsPerS > 0 {
		b.ThroughputRatio = fleetRes.TurnsPerS / b.TurnsPerS
	}
	if b.LatencyMs.P50 > 0 {
		b.P50Ratio = fleetRes.LatencyMs.P50 / b.LatencyMs.P50
	}
	b.BusP50Ms = fleetRes.LatencyMs.P50 - b.LatencyMs.P50
	b.BusP99Ms = fleetRes.LatencyMs.P99 - b.LatencyMs.P99
	r.logf("  %-28s %8.1f turns/s  p50 %7.1f ms  p99 %7.1f ms  (baseline: agent loop without the bus)",
		sc.name, b.TurnsPerS, b.LatencyMs.P50, b.LatencyMs.P99)
	return b, nil
}

// baselineTools offers the tools a fleet turn offers (the runner's set and
// the worker's message tool) and runs calls in this process on the
// workspace, opened per call as the runner does.
type baselineTools struct {
	defs []*nanofleetv1.ToolDefinition
	set  *tools.Set
	root string
	log  *slog.Logger
}

func newBaselineTools(ws string) (*baselineTools, error) {
	cfg := runner.DefaultConfig()
	cfg.Workspace.Root = ws
	rn, err := runner.New(cfg, nil)
	if err != nil {
		return nil, err
	}
	var defs []*nanofleetv1.ToolDefinition
	for _, t := range rn.Tools().Definitions() {
		defs = append(defs, t.Definition())
	}
	defs = append(defs, worker.MessageTool{}.Tool().Definition())
	toolschema.SortDefinitions(defs)
	return &baselineTools{defs: defs, set: rn.Tools(), root: ws, log: slog.New(slog.DiscardHandler)}, nil
}

func (b *baselineTools) Definitions() []*nanofleetv1.ToolDefinition { return b.defs }

func (b *baselineTools) Call(ctx context.Context, call *nanofleetv1.ToolCall) *nanofleetv1.ToolResult {
	fail := func(err error) *nanofleetv1.ToolResult {
		return &nanofleetv1.ToolResult{CallId: call.GetId(), IsError: true, Content: "Error: " + err.Error()}
	}
	tool, schema, ok := b.set.Get(call.GetName())
	if !ok {
		return fail(fmt.Errorf("tool %s does not run in the baseline", call.GetName()))
	}
	args, err := schema.Parse(call.GetArgumentsJson())
	if err != nil {
		return fail(err)
	}
	ws, err := sandbox.OpenWorkspace(b.root)
	if err != nil {
		return fail(err)
	}
	defer ws.Close()
	out, err := tool.Run(ctx, &tools.Call{ID: call.GetId(), Args: args, Workspace: ws, Log: b.log})
	if err != nil {
		return fail(err)
	}
	return &nanofleetv1.ToolResult{CallId: call.GetId(), Content: out.Text, Media: out.Media}
}
