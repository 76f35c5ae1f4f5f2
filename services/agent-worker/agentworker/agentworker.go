// Package agentworker assembles an agent worker from the fleet's config: the
// model provider, the profile cache, the tool client and the worker-side
// tools, with metrics. The agent-worker binary and the all-in-one use it.
package agentworker

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/agenttool"
	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/every"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/schedule"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/pkg/usage"
	"github.com/nanofleet/nanofleet/services/agent-worker/agent"
	"github.com/nanofleet/nanofleet/services/agent-worker/subagent"
	"github.com/nanofleet/nanofleet/services/agent-worker/worker"
)

// Section is the config file's "worker" section: the worker's own keys,
// decoded straight into [worker.Config] by their json tags, and the model
// client's retries.
type Section struct {
	worker.Config
	// ModelRetries is how often a failed model call is retried before the
	// user gets an error reply.
	ModelRetries int `json:"modelRetries"`
}

// DefaultSection is the section of a file that does not have one.
func DefaultSection() Section {
	return Section{Config: worker.DefaultConfig(), ModelRetries: 2}
}

// Deps are what the process gives the worker besides the config file.
type Deps struct {
	// Bus is the fleet's connection; the core layout and [Assets] must
	// have been provisioned.
	Bus *bus.Bus
	// Getenv reads the model's API key; nil means os.Getenv.
	Getenv func(string) string
	// ID names the worker; default hostname-pid.
	ID string
	// Workspace path shown to the model (tools run on the runners).
	Workspace string
	Tools     worker.RemoteTools
	// Memory overrides the fleet's long-term memory (tests); nil opens it
	// from the config's "memory" section.
	Memory   worker.Memory
	Local    []agenttool.Tool
	Commands []agenttool.Command
	Metrics  *observe.Metrics
}

// Option changes an optional setting of [New].
type Option func(*Worker)

// WithLogger sets the worker's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(w *Worker) { w.log = observe.OrDiscard(l) } }

// Worker is an assembled worker with the parts it owns.
type Worker struct {
	turns            *worker.Worker
	profiles         *profile.Cache
	metrics          *observe.Metrics
	stream, consumer string
	nc               *nats.Conn
	id               string
	jobs             *jobs
	log              *slog.Logger
}

// Close stops the profile watch.
func (w *Worker) Close() { w.profiles.Stop() }

// StopTurns makes Run cancel the running turns as it stops instead of
// letting them finish (see [worker.Worker.StopTurns]).
func (w *Worker) StopTurns() { w.turns.StopTurns() }

// ConfigFrom reads the worker's config from the config file.
func ConfigFrom(file *config.File, id, workspace string) (worker.Config, Section, error) {
	sec := DefaultSection()
	// What decoded past a refused key is checked too: one start names
	// every problem of the section.
	decodeErr := file.Section("worker", &sec)
	d := file.Agents.Defaults
	loc, err := time.LoadLocation(d.Timezone)
	if err != nil {
		loc = time.UTC
		decodeErr = errors.Join(decodeErr, config.Invalid("agents.defaults.timezone", "%w", err))
	}
	// The rest comes from the shared sections.
	cfg := sec.Config
	cfg.ID = id
	cfg.Model = d.Model
	cfg.Loop = agent.Config{MaxIterations: d.MaxToolIterations, Temperature: d.Temperature, MaxTokens: d.MaxTokens}
	cfg.ContextWindowTokens = d.ContextWindowTokens
	cfg.Location = loc
	cfg.Workspace = workspace
	cfg.LeaseTTL = config.SecondsDuration(file.NATS.LeaseTTLSeconds)
	if err := errors.Join(decodeErr, cfg.Validate()); err != nil {
		return cfg, sec, err
	}
	return cfg, sec, nil
}

// Model builds the model provider from the config and environment
// ([llm.NewFromFile]) with retries as modelRetries counts them: 0 retries
// nothing.
func Model(file *config.File, getenv func(string) string, retries int, log *slog.Logger) (llm.Client, string, error) {
	if retries == 0 {
		retries = -1
	}
	return llm.NewFromFile(file, getenv, retries, "turns answer with an error", llm.WithLogger(log))
}

// Assets declares the JetStream assets a worker uses besides the core
// layout: the usage bucket of the token budget, the memory streams, the
// schedule stream and the subagents bucket.
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.Join(usage.Assets, memory.Assets, schedule.Assets, subagent.Assets)(sp, l)
}

// New assembles a worker from the config file.
func New(ctx context.Context, file *config.File, o Deps, opts ...Option) (*Worker, error) {
	w := &Worker{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(w)
	}
	b := o.Bus
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Tools == nil {
		return nil, errors.New("agent-worker: no tool client")
	}
	if o.ID == "" {
		o.ID = fleetstatus.DefaultID()
	}
	cfg, sec, err := ConfigFrom(file, o.ID, o.Workspace)
	if err != nil {
		return nil, err
	}
	model, provider, err := Model(file, o.Getenv, sec.ModelRetries, w.log)
	if err != nil {
		return nil, err
	}
	if o.Metrics != nil {
		model = instrumented{Client: model, m: o.Metrics, provider: provider}
	}
	kv, err := b.KV(ctx, bus.BucketProfile)
	if err != nil {
		return nil, err
	}
	profiles, err := profile.Watch(ctx, kv)
	if err != nil {
		return nil, err
	}
	select {
	case <-profiles.Ready():
	case <-ctx.Done():
		profiles.Stop()
		return nil, ctx.Err()
	}
	local := append([]agenttool.Tool{worker.MessageTool{AllowTo: cfg.MessageAllowTo}}, o.Local...)
	commands := o.Commands
	mem := o.Memory
	if mem == nil {
		store, err := openMemory(ctx, b, file, w.log)
		if err != nil {
			profiles.Stop()
			return nil, err
		}
		mem = store
		local = append(local, store.Tools()...)
		commands = append(commands, store.Commands()...)
	}
	jb, err := openJobs(ctx, b, file, cfg.Location, profiles, w.log)
	if err != nil {
		profiles.Stop()
		return nil, err
	}
	local = append(local, jb.tools...)
	turns, err := worker.New(ctx, cfg, worker.Deps{
		Bus: b, Model: model, Tools: o.Tools, Profiles: profiles, Memory: mem,
		Local: local, Commands: commands, Observer: observer(o.Metrics),
	}, worker.WithLogger(w.log.With("worker", o.ID)))
	if err != nil {
		profiles.Stop()
		return nil, err
	}
	w.turns, w.profiles, w.metrics, w.jobs = turns, profiles, o.Metrics, jb
	w.stream, w.consumer, w.nc, w.id = b.Space.InboundStream(), b.Space.WorkerConsumer(), b.NC, o.ID
	return w, nil
}

// openMemory opens the fleet's long-term memory with the config's
// "memory" section.
func openMemory(ctx context.Context, b *bus.Bus, file *config.File, log *slog.Logger) (*memory.Store, error) {
	mcfg, err := memory.ConfigFrom(file)
	if err != nil {
		return nil, err
	}
	return memory.New(ctx, mcfg, b, memory.WithLogger(log))
}

func observer(m *observe.Metrics) worker.Observer {
	if m == nil {
		return worker.Observer{}
	}
	return worker.Observer{
		TurnDone: func(outcome string, d time.Duration) {
			m.Turns.WithLabelValues(outcome).Inc()
			m.TurnDuration.Observe(d.Seconds())
		},
		LeaseContention: m.LeaseContention.Inc,
		Redelivered:     m.Redeliveries.Inc,
		DeadLettered:    func(src string) { m.DeadLetters.WithLabelValues(src).Inc() },
		ToolCalled: func(tool, outcome string) {
			m.ToolCalls.WithLabelValues(tool, outcome).Inc()
			if outcome == "denied" {
				m.SandboxRefusals.WithLabelValues(refusalReason(tool)).Inc()
			}
		},
	}
}

// Run runs the worker and, with metrics, samples the inbound consumer's
// backlog every few seconds.
func (w *Worker) Run(ctx context.Context) error {
	stop, err := fleetstatus.Register(ctx, w.nc, fleetstatus.WorkerService, w.id)
	if err != nil {
		return err
	}
	defer stop()
	if w.metrics != nil {
		go w.sampleLag(ctx)
	}
	// The job parts stop with the worker. One that fails on the bus for a
	// transient reason starts again after a backoff; one that fails for
	// good is logged, not fatal: turns go on without schedules rather than
	// not at all.
	jobCtx, stopJobs := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, run := range w.jobs.run {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := bus.Retry(jobCtx, backoff.Backoff{}, run, func(err error, wait time.Duration) {
				w.log.Warn("schedule job part failed; starting it again", "err", err, "retry_in", wait)
			})
			if err != nil && jobCtx.Err() == nil {
				w.log.Error("schedule job part stopped", "err", err)
			}
		}()
	}
	err = w.turns.Run(ctx)
	stopJobs()
	wg.Wait()
	return err
}

func (w *Worker) sampleLag(ctx context.Context) {
	every.TickNow(ctx, 5*time.Second, func() bool {
		if pending, _, err := w.turns.Pending(ctx); err == nil {
			w.metrics.ConsumerPending.WithLabelValues(w.stream, w.consumer).Set(float64(pending))
		}
		return true
	})
}

// instrumented records model latency and tokens.
type instrumented struct {
	llm.Client
	m        *observe.Metrics
	provider string
}

func (i instrumented) Chat(ctx context.Context, req llm.Request) (*llm.Response, error) {
	start := time.Now()
	resp, err := i.Client.Chat(ctx, req)
	model := req.Model
	i.m.ModelRequestDuration.WithLabelValues(i.provider, model).Observe(time.Since(start).Seconds())
	if resp != nil {
		u := resp.Usage
		for kind, n := range map[string]int{
			observe.TokensPrompt: u.PromptTokens, observe.TokensCompletion: u.CompletionTokens,
			observe.TokensCached: u.CachedTokens, observe.TokensReasoning: u.ReasoningTokens,
		} {
			i.m.ModelTokens.WithLabelValues(i.provider, model, kind).Add(float64(n))
		}
	}
	return resp, err
}

// refusalReason names why the sandbox refused a call of tool: the runners
// answer DENIED for path escapes in file tools, for exec without a working
// sandbox or a denied command, and for private addresses in web tools.
func refusalReason(tool string) string {
	switch tool {
	case "exec":
		return observe.RefusalNoSandbox
	case "web_fetch", "web_search":
		return observe.RefusalPrivateAddress
	}
	return observe.RefusalPathEscape
}
