// Package dream is Dream, the memory-consolidator's scheduled system job:
// it reads the history entries logged since its last run and asks the
// model to refine each scope's MEMORY.md and, for the agent's shared
// scope, USER.md, SOUL.md and the skills.
//
// # Schedule
//
// The schedule is a message with a Nats-Schedule header ("@every 2h" by
// default, or a cron expression with a time zone) in the memory jobs
// stream; NATS itself fires it onto a subject all consolidators consume
// through one durable consumer, so a fire runs once however many
// consolidators there are, and no leader election is needed. Every
// consolidator re-creates the schedule when it is missing or differs from
// its config, so users can see the job (memory.ListJobs) but not delete it.
//
// # Guarantees
//
// A run holds the lease "memory.dream.<agent>". Each file is changed by
// compare-and-set on the revision the model saw; a file edited meanwhile
// keeps the edit and Dream's change to it is dropped (the next run sees the
// edit). Every run that changes something stores one revision per scope
// with the content before and after, so /dream-log shows it and
// /dream-restore undoes it. Dream's cursor (the last history-log sequence
// it read) moves after the scopes are done; a run cut short is redone from
// the same entries, and its revision is stored once (deterministic message
// id). Profile files are refined only from the agent scope's entries, so in
// user or session scope no user's facts reach the shared prompt.
//
// # Token usage
//
// Dream's model calls count in no user's daily token budget (package
// usage): a run is nobody's turn, it refines the memory of every scope
// from all users' entries on the fleet's schedule, so the operator pays
// for it. Consolidations, which a user's turn asks for, count for that
// user.
package dream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/every"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/held"
)

// JobName is the system job's name.
const JobName = "dream"

// Deps are Dream's collaborators.
type Deps struct {
	Bus   *bus.Bus
	Model llm.Client
	// Ran, when set, is told of every run with the revisions it stored.
	Ran func(revisions []uint64, err error)
}

// Job is Dream for one agent.
type Job struct {
	cfg     Config
	d       Deps
	names   memory.Names
	docs    *memory.Docs
	hist    *memory.Log
	revs    *memory.Revisions
	profile jetstream.KeyValue
	mem     jetstream.KeyValue
	leases  *held.Leases
	cons    jetstream.Consumer
	stream  jetstream.Stream
	log     *slog.Logger
}

// Option changes an optional setting of [New].
type Option func(*Job)

// WithLogger sets Dream's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(j *Job) { j.log = observe.OrDiscard(l) } }

// New prepares Dream: it opens the stores and creates or updates the
// durable consumer of the fires. The bus layout and memory.Assets must
// have been provisioned.
func New(ctx context.Context, cfg Config, d Deps, opts ...Option) (*Job, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Bus == nil || d.Model == nil {
		return nil, errors.New("dream: Bus and Model are required")
	}
	j := &Job{cfg: cfg, d: d, names: memory.NamesOf(d.Bus.Space), hist: memory.OpenLog(d.Bus), log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(j)
	}
	var err error
	if j.docs, err = memory.OpenDocs(ctx, d.Bus); err != nil {
		return nil, err
	}
	if j.revs, err = memory.OpenRevisions(ctx, d.Bus); err != nil {
		return nil, err
	}
	if j.profile, err = d.Bus.KV(ctx, bus.BucketProfile); err != nil {
		return nil, err
	}
	if j.mem, err = d.Bus.KV(ctx, bus.BucketMemory); err != nil {
		return nil, err
	}
	if j.leases, err = held.Open(ctx, d.Bus); err != nil {
		return nil, err
	}
	if j.stream, err = d.Bus.JS.Stream(ctx, j.names.JobStream()); err != nil {
		return nil, fmt.Errorf("dream: %w (provision memory.Assets)", err)
	}
	j.cons, err = d.Bus.JS.CreateOrUpdateConsumer(ctx, j.names.JobStream(), jetstream.ConsumerConfig{
		Durable:       "dream_" + subject.Token(cfg.Agent),
		Description:   "Dream runs of agent " + cfg.Agent,
		FilterSubject: j.names.JobFire(JobName, cfg.Agent),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    3,
		DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("dream: consumer: %w", err)
	}
	return j, nil
}

// Schedule makes sure the job's schedule message is there and says what
// the config says.
func (j *Job) Schedule(ctx context.Context) error {
	subj := j.names.JobSchedule(JobName, j.cfg.Agent)
	target := j.names.JobFire(JobName, j.cfg.Agent)
	want := bus.Schedule{Pattern: j.cfg.Pattern(), Target: target, TimeZone: j.cfg.TimeZone}
	cur, err := j.stream.GetLastMsgForSubject(ctx, subj)
	if err == nil && bus.ScheduleOf(cur.Header) == want {
		return nil
	}
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("dream: read schedule: %w", err)
	}
	body, _ := proto.Marshal(&nanofleetv1.SystemJobFire{Job: JobName, Agent: j.cfg.Agent})
	m := want.Msg(subj, body)
	m.Header.Set(memory.HeaderSystemJob, JobName)
	if _, err := bus.PublishMsg(ctx, j.d.Bus.JS, m); err != nil {
		return fmt.Errorf("dream: publish schedule %q: %w", j.cfg.Pattern(), err)
	}
	j.log.Info("dream scheduled", "agent", j.cfg.Agent, "schedule", j.cfg.Pattern(), "timezone", j.cfg.TimeZone)
	return nil
}

// Run keeps the schedule in place and runs Dream on each fire until ctx
// ends.
func (j *Job) Run(ctx context.Context) error {
	// A cluster electing leaders delays the schedule; it does not stop
	// the service.
	err := bus.Retry(ctx, backoff.Backoff{}, j.Schedule, func(err error, wait time.Duration) {
		j.log.Warn("dream schedule: nats not ready; retrying", "err", err, "retry_in", wait)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// The schedule is checked beside the fires, so that a run, however
	// long, does not delay putting back a schedule that went missing.
	stop := every.Go(ctx, time.Minute, func() bool {
		if err := j.Schedule(ctx); err != nil && ctx.Err() == nil {
			j.log.Warn("dream schedule check", "err", err)
		}
		return true
	})
	defer stop()
	// One fire at a time. A run cut short by shutdown is safe: the cursor
	// has not moved.
	wait := bus.Pull(ctx, j.cons, 1, j.log, func(m jetstream.Msg) { j.fire(ctx, m) })
	wait()
	return nil
}

func (j *Job) fire(ctx context.Context, m jetstream.Msg) {
	stop := bus.InProgress(ctx, m, j.cfg.AckWait/3)
	revs, err := j.RunOnce(ctx)
	stop()
	if j.d.Ran != nil {
		j.d.Ran(revs, err)
	}
	if err != nil && !errors.Is(err, lease.ErrHeld) {
		j.log.Warn("dream run failed; the next fire retries", "err", err)
	}
	_ = m.Ack()
}

// RunOnce runs Dream now and returns the revisions it stored.
// lease.ErrHeld means another run is in progress.
func (j *Job) RunOnce(ctx context.Context) ([]uint64, error) {
	l, job, err := j.leases.Take(ctx, "memory.dream."+subject.Token(j.cfg.Agent), j.cfg.ID, 0, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = l.Release(rctx)
	}()
	cursor, crev, err := j.cursor(job)
	if err != nil {
		return nil, err
	}
	entries, err := j.hist.Agent(job, j.cfg.Agent, cursor, j.cfg.MaxEntries)
	if err != nil {
		return nil, err
	}
	entries = fit(entries, j.cfg.MaxInputChars)
	if len(entries) == 0 {
		return nil, nil
	}
	from, to := entries[0].Seq, entries[len(entries)-1].Seq
	byScope := map[string][]memory.Entry{}
	for _, e := range entries {
		byScope[e.GetScope()] = append(byScope[e.GetScope()], e)
	}
	scopes := slices.Sorted(maps.Keys(byScope))
	var stored []uint64
	for _, key := range scopes {
		sc, err := memory.ParseScope(key)
		if err != nil {
			j.log.Warn("dream: entries with a bad scope skipped", "scope", key, "err", err)
			continue
		}
		rev, err := j.refine(job, sc, byScope[key], from, to)
		if err != nil {
			return stored, err
		}
		if rev > 0 {
			stored = append(stored, rev)
		}
	}
	if err := j.setCursor(job, to, crev); err != nil {
		return stored, err
	}
	j.log.Info("dream ran", "agent", j.cfg.Agent, "entries", len(entries), "scopes", len(scopes), "revisions", stored)
	return stored, nil
}

// fit keeps the oldest entries within maxChars (at least one).
func fit(entries []memory.Entry, maxChars int) []memory.Entry {
	total := 0
	for i, e := range entries {
		total += len(e.GetText())
		if total > maxChars && i > 0 {
			return entries[:i]
		}
	}
	return entries
}

func (j *Job) cursor(ctx context.Context) (uint64, uint64, error) {
	e, err := bus.Get(ctx, j.mem, memory.DreamCursorKey(j.cfg.Agent))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("dream cursor: %w", err)
	}
	seq, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("dream cursor %q: %w", e.Value(), err)
	}
	return seq, e.Revision(), nil
}

func (j *Job) setCursor(ctx context.Context, seq, rev uint64) error {
	val := []byte(strconv.FormatUint(seq, 10))
	_, err := bus.CompareAndSet(ctx, j.mem, memory.DreamCursorKey(j.cfg.Agent), val, rev)
	if errors.Is(err, jetstream.ErrKeyExists) {
		// Another run moved it; its revisions cover what it read.
		return nil
	}
	if err != nil {
		return fmt.Errorf("dream cursor: %w", err)
	}
	return nil
}

// now is the time for revisions.
func now() *timestamppb.Timestamp { return timestamppb.Now() }

// trimEq compares file contents ignoring surrounding space.
func trimEq(a, b string) bool { return strings.TrimSpace(a) == strings.TrimSpace(b) }
