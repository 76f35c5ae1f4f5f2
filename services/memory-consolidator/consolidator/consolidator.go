package consolidator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/pkg/usage"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/held"
)

// DeadLetterSource is the dead-letter source of bad requests.
const DeadLetterSource = "memory"

// ConsumerName is the durable consumer all consolidators share.
const ConsumerName = "consolidators"

// Observer is told what requests do, for metrics. Any field may be nil.
type Observer struct {
	// Done is called once per request with "ok", "raw" (the model failed
	// and raw turns were archived), "skipped" (already consolidated),
	// "dead_letter" or "retry".
	Done func(outcome string, d time.Duration)
}

// Deps are a consolidator's collaborators.
type Deps struct {
	Bus      *bus.Bus
	Model    llm.Client
	Observer Observer
}

// Consolidator consumes consolidation requests.
type Consolidator struct {
	cfg      Config
	d        Deps
	cons     jetstream.Consumer
	sessions *session.Store
	docs     *memory.Docs
	hist     *memory.Log
	leases   *held.Leases
	groups   *groups
	count    *usage.Counter // the users' daily tokens, for the budget
	log      *slog.Logger
}

// Option changes an optional setting of [New].
type Option func(*Consolidator)

// WithLogger sets the consolidator's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(c *Consolidator) { c.log = observe.OrDiscard(l) } }

// New prepares a consolidator: it opens the stores and creates or updates
// the shared consumer. The bus layout, memory.Assets and usage.Assets
// must have been provisioned.
func New(ctx context.Context, cfg Config, d Deps, opts ...Option) (*Consolidator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Bus == nil || d.Model == nil {
		return nil, errors.New("consolidator: Bus and Model are required")
	}
	sessions, err := session.Open(ctx, d.Bus)
	if err != nil {
		return nil, err
	}
	docs, err := memory.OpenDocs(ctx, d.Bus)
	if err != nil {
		return nil, err
	}
	leases, err := held.Open(ctx, d.Bus)
	if err != nil {
		return nil, err
	}
	count, err := usage.Open(ctx, d.Bus)
	if err != nil {
		return nil, fmt.Errorf("consolidator: %w", err)
	}
	sp := d.Bus.Space
	cons, err := d.Bus.JS.CreateOrUpdateConsumer(ctx, sp.MemoryStream(), jetstream.ConsumerConfig{
		Durable:       ConsumerName,
		Description:   "memory consolidators: condense old turns into memory",
		FilterSubject: sp.ConsolidateAll(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       time.Duration(cfg.AckWait),
		MaxAckPending: 1024,
		MaxDeliver:    -1, // counted here, then dead-lettered with a reason
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("consolidator: consumer: %w", err)
	}
	c := &Consolidator{
		cfg: cfg, d: d, cons: cons, sessions: sessions, docs: docs,
		hist: memory.OpenLog(d.Bus), leases: leases, groups: newGroups(cfg.Slots), count: count, log: slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Run fetches and handles requests until ctx ends, then lets running ones
// finish.
func (c *Consolidator) Run(ctx context.Context) error {
	// Requests in progress may finish within the shutdown grace when ctx
	// ends; then they are cancelled and redelivered elsewhere (every write
	// is conditional, so a cut-off request leaves nothing half done).
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	// A request waiting in a document's queue gives its slot back (see
	// slot), so that the queue can fill to Config.BatchMax.
	wait := bus.PullReleasing(ctx, c.cons, c.cfg.Slots, c.log.With("consumer", "consolidation requests"), func(m jetstream.Msg, release func()) {
		c.serve(work, m, release)
	})
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	t := time.NewTimer(c.cfg.ShutdownGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		c.log.Warn("shutdown grace over; cancelling consolidations in progress")
	}
	cancelWork()
	<-done
	return nil
}

// Handle processes one request message and acks, naks or dead-letters it.
func (c *Consolidator) Handle(ctx context.Context, m jetstream.Msg) { c.serve(ctx, m, nil) }

// serve is Handle for a request pulled into a slot that release gives
// back to the pull loop (nil: it keeps the slot to the end).
func (c *Consolidator) serve(ctx context.Context, m jetstream.Msg, release func()) {
	start := time.Now()
	outcome := c.handle(ctx, m, release)
	if c.d.Observer.Done != nil {
		c.d.Observer.Done(outcome, time.Since(start))
	}
}

func (c *Consolidator) handle(ctx context.Context, m jetstream.Msg, release func()) string {
	meta, err := m.Metadata()
	if err != nil {
		c.log.Error("consolidation request without metadata", "err", err)
		_ = m.Term()
		return "dead_letter"
	}
	req, reason := c.decode(m)
	if reason == "" && meta.NumDelivered > uint64(c.cfg.MaxDeliveries) {
		reason = fmt.Sprintf("consolidation did not succeed in %d deliveries", c.cfg.MaxDeliveries)
	}
	if reason != "" {
		return c.deadLetter(ctx, m, meta, reason)
	}
	log := c.log.With("session", req.GetSessionKey(), "from", req.GetFromSeq(), "to", req.GetToSeq())
	outcome, err := c.consolidate(ctx, m, req, &slot{release: release}, log)
	switch {
	case err == nil:
		if err := m.Ack(); err != nil {
			log.Warn("ack consolidation request", "err", err)
		}
		return outcome
	case errors.Is(err, memory.ErrTooLarge):
		// Even the raw turns, or the document with memory kept, are more
		// than the bus accepts: no retry can store them.
		return c.deadLetter(ctx, m, meta, "consolidation cannot be stored: "+oneLine(err))
	case errors.Is(err, lease.ErrHeld):
		log.Debug("session or its memory busy with another consolidator; later")
		_ = m.NakWithDelay(time.Second)
		return "retry"
	default:
		log.Warn("consolidation failed; will retry", "err", err, "delivery", meta.NumDelivered)
		_ = m.NakWithDelay(retryDelay(meta.NumDelivered))
		return "retry"
	}
}

// decode returns the request, or why it is unacceptable.
func (c *Consolidator) decode(m jetstream.Msg) (*nanofleetv1.ConsolidationRequest, string) {
	if n := len(m.Data()); n > c.cfg.MaxRequestBytes {
		return nil, fmt.Sprintf("consolidation request of %d bytes exceeds the maximum of %d", n, c.cfg.MaxRequestBytes)
	}
	req := &nanofleetv1.ConsolidationRequest{}
	if err := proto.Unmarshal(m.Data(), req); err != nil {
		return nil, fmt.Sprintf("malformed ConsolidationRequest: %v", err)
	}
	switch {
	case req.GetSessionKey() == "":
		return nil, "malformed ConsolidationRequest: no session_key"
	case req.GetToSeq() == 0 || req.GetFromSeq() > req.GetToSeq():
		return nil, fmt.Sprintf("malformed ConsolidationRequest: range %d-%d is empty", req.GetFromSeq(), req.GetToSeq())
	case m.Subject() != c.d.Bus.Space.Consolidate(req.GetSessionKey()):
		return nil, fmt.Sprintf("malformed ConsolidationRequest: session %q does not belong on subject %s", req.GetSessionKey(), m.Subject())
	}
	if _, err := memory.ParseScope(req.GetScope()); err != nil {
		return nil, fmt.Sprintf("malformed ConsolidationRequest: scope: %v", err)
	}
	return req, ""
}

func (c *Consolidator) deadLetter(ctx context.Context, m jetstream.Msg, meta *jetstream.MsgMetadata, reason string) string {
	err := c.d.Bus.DeadLetter(ctx, DeadLetterSource, bus.LetterOf(m, reason))
	if err != nil {
		c.log.Error("dead-letter consolidation request", "err", err)
		_ = m.NakWithDelay(time.Second)
		return "retry"
	}
	c.log.Warn("consolidation request dead-lettered", "subject", m.Subject(), "seq", meta.Sequence.Stream, "reason", reason)
	_ = m.Term()
	return "dead_letter"
}

// leaseKey is the per-session consolidation lease.
func leaseKey(sessionKey string) string { return "memory.consolidate." + subject.Token(sessionKey) }

// documentLeaseKey is the lease on a scope's MEMORY.md, held from reading
// it to writing it.
func documentLeaseKey(scope memory.Scope) string { return "memory.document." + scope.Key() }

// retryDelay is the wait before delivery n+1 of a failed request: 1 s,
// doubling up to a minute.
func retryDelay(delivered uint64) time.Duration {
	return backoff.Backoff{Min: time.Second, Max: time.Minute}.Delay(int(min(delivered, 64)) - 1)
}

// oneLine shortens an error for logs.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }
