package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/agent"
)

// RemoteTools reaches the tool runners (toolclient.Client).
type RemoteTools interface {
	// CachedCatalog returns the runners' tools, sorted by name, from a
	// cache that serves an old catalog while it refreshes it; the same
	// slice until it changes, not to be modified.
	CachedCatalog(ctx context.Context) ([]*nanofleetv1.ToolDefinition, error)
	Call(ctx context.Context, req *nanofleetv1.ToolRequest) (*nanofleetv1.ToolResult, error)
}

// Memory gives turns their long-term memory and asks for consolidation.
// A nil Memory means turns run without long-term memory.
type Memory interface {
	// Context returns the memory text for the prompt of a turn.
	Context(ctx context.Context, in *nanofleetv1.InboundMessage, sessionKey string) (string, error)
	// AfterTurn runs after a commit; it may request consolidation of old
	// turns that no longer fit the budget. payer is the turn's
	// subagent.Payer: the consolidation's model calls count in that
	// user's daily token usage, as the turn's do.
	AfterTurn(ctx context.Context, in *nanofleetv1.InboundMessage, sessionKey, payer string, info *nanofleetv1.SessionInfo, hist *session.History, budgetTokens int) error
	// Archive requests consolidation of everything up to seq (for /new),
	// counted for payer as in AfterTurn.
	Archive(ctx context.Context, in *nanofleetv1.InboundMessage, sessionKey, payer string, info *nanofleetv1.SessionInfo, upTo uint64) error
}

// Observer is told what turns do, for metrics. Any field may be nil.
type Observer struct {
	TurnDone        func(outcome string, d time.Duration)
	LeaseContention func()
	Redelivered     func()
	DeadLettered    func(source string)
	// ToolCalled is told each tool call's outcome ("ok" or the error kind).
	ToolCalled func(tool, outcome string)
}

// Deps are a worker's collaborators.
type Deps struct {
	Bus      *bus.Bus
	Model    llm.Client
	Tools    RemoteTools
	Profiles *profile.Cache
	Memory   Memory
	// Local tools run inside the worker (message, spawn, cron, memory).
	Local []LocalTool
	// Commands extend the built-in slash commands.
	Commands []Command
	Observer Observer
}

// Worker runs turns.
type Worker struct {
	cfg      Config
	d        Deps
	loop     *agent.Loop
	sessions *session.Store
	leases   *lease.Table
	inbound  jetstream.Stream
	cons     jetstream.Consumer
	catalog  *catalog
	budget   *budget // nil without worker.dailyTokenBudget
	log      *slog.Logger
	// fifoWarn bounds the FIFO guard's warnings: after a node restart
	// every waiting turn fails the check while a replica catches up.
	fifoWarn *observe.Throttled

	// stopTurns is closed by StopTurns: the running turns are cancelled
	// as Run stops instead of finishing within the grace.
	stopTurns     chan struct{}
	stopTurnsOnce sync.Once

	mu      sync.Mutex
	running map[string]*localTurn // by session key
	// answered is, by session key, the inbound sequence of the last turn
	// this worker committed and answered; its ack may still be on the way
	// (see oldest).
	answered map[string]uint64
}

// Option changes an optional setting of [New].
type Option func(*Worker)

// WithLogger sets the worker's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(w *Worker) { w.log = observe.OrDiscard(l) } }

// New prepares a worker: it opens the stores and creates or updates the
// shared consumer. The fleet's layout must be provisioned.
func New(ctx context.Context, cfg Config, d Deps, opts ...Option) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Bus == nil || d.Model == nil || d.Tools == nil || d.Profiles == nil {
		return nil, errors.New("worker: Bus, Model, Tools and Profiles are required")
	}
	w := &Worker{log: slog.New(slog.DiscardHandler), stopTurns: make(chan struct{})}
	for _, o := range opts {
		o(w)
	}
	loop, err := agent.New(cfg.Loop, d.Model, agent.WithLogger(w.log))
	if err != nil {
		return nil, err
	}
	sessions, err := session.Open(ctx, d.Bus, session.WithHistoryCache(int64(cfg.HistoryCacheMB)<<20))
	if err != nil {
		return nil, err
	}
	leaseKV, err := d.Bus.KV(ctx, bus.BucketLeases)
	if err != nil {
		return nil, err
	}
	sp := d.Bus.Space
	st, err := d.Bus.JS.Stream(ctx, sp.InboundStream())
	if err != nil {
		return nil, fmt.Errorf("worker: inbound stream: %w", err)
	}
	cons, err := d.Bus.JS.CreateOrUpdateConsumer(ctx, sp.InboundStream(), jetstream.ConsumerConfig{
		Durable:       sp.WorkerConsumer(),
		Description:   "agent workers: one turn per inbound message",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       time.Duration(cfg.AckWait),
		MaxAckPending: cfg.FleetTurnLimit,
		MaxDeliver:    -1, // waiting for a busy session is not a failure; attempts are counted in checkpoints
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("worker: consumer: %w", err)
	}
	w.cfg, w.d, w.loop, w.sessions, w.leases = cfg, d, loop, sessions, lease.NewTable(leaseKV, lease.WithPublisher(d.Bus.JS))
	w.inbound, w.cons, w.running, w.answered = st, cons, map[string]*localTurn{}, map[string]uint64{}
	w.catalog = &catalog{remote: d.Tools, local: d.Local, log: w.log}
	w.fifoWarn = observe.NewThrottled(w.log, observe.ThrottleEvery)
	if cfg.DailyTokenBudget > 0 {
		if w.budget, err = openBudget(ctx, d.Bus, cfg.DailyTokenBudget); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Run fetches and runs turns until ctx ends, then stops fetching and lets
// running turns finish within the shutdown grace.
func (w *Worker) Run(ctx context.Context) error {
	stopSub, err := w.d.Bus.NC.Subscribe(w.d.Bus.Space.StopAll(), w.onStop)
	if err != nil {
		return fmt.Errorf("worker: subscribe stop: %w", err)
	}
	defer func() { _ = stopSub.Unsubscribe() }()

	// Turns outlive ctx by the grace period: a SIGTERM stops fetching, not
	// the turns already running.
	turnCtx, cancelTurns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelTurns()
	wait := bus.Pull(ctx, w.cons, w.cfg.Slots, w.log.With("consumer", "inbound"), func(m jetstream.Msg) {
		w.handle(turnCtx, m)
	})
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	select {
	case <-done:
	case <-w.stopTurns:
		cancelTurns()
		<-done
	case <-time.After(time.Duration(w.cfg.ShutdownGrace)):
		w.log.Warn("shutdown grace over; cancelling running turns")
		cancelTurns()
		<-done
	}
	return nil
}

// StopTurns makes Run, once its context ends, cancel the running turns
// instead of letting them finish within the shutdown grace: for a process
// told to stop now. A cancelled turn is not acknowledged, so it resumes
// from its checkpoint when redelivered.
func (w *Worker) StopTurns() { w.stopTurnsOnce.Do(func() { close(w.stopTurns) }) }

// onStop cancels the session's running turn if it runs here and its
// message came before the /stop (see StopRequest.before_seq).
func (w *Worker) onStop(m *nats.Msg) {
	req := &nanofleetv1.StopRequest{}
	if err := proto.Unmarshal(m.Data, req); err != nil {
		return
	}
	w.mu.Lock()
	var cancel context.CancelCauseFunc
	if lt := w.running[req.GetSessionKey()]; lt != nil && (req.GetBeforeSeq() == 0 || lt.seq < req.GetBeforeSeq()) {
		cancel = lt.cancel
		lt.stopped = true // for a turn not in its model loop yet
	}
	w.mu.Unlock()
	if cancel != nil {
		w.log.Info("stopping turn", "session", req.GetSessionKey())
		cancel(errStopped)
	}
}

// Pending reports the shared consumer's backlog: messages not yet
// delivered and messages delivered but not acked.
func (w *Worker) Pending(ctx context.Context) (pending uint64, inFlight int, err error) {
	info, err := w.cons.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("consumer info: %w", err)
	}
	return info.NumPending, info.NumAckPending, nil
}

// RequestStop asks whichever worker runs the session's turn to stop it,
// if that turn's message came before beforeSeq (0: any turn).
func RequestStop(nc *nats.Conn, sp subject.Space, sessionKey, by string, beforeSeq uint64) error {
	data, _ := proto.Marshal(&nanofleetv1.StopRequest{SessionKey: sessionKey, RequestedBy: by, BeforeSeq: beforeSeq})
	if err := nc.Publish(sp.Stop(sessionKey), data); err != nil {
		return fmt.Errorf("publish stop for %s: %w", sessionKey, err)
	}
	return nil
}

var (
	errStopped     = errors.New("stopped by /stop")
	errLeaseLost   = errors.New("session lease lost")
	errTurnTimeout = errors.New("turn timed out")
)
