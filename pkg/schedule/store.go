package schedule

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/metakey"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Headers of a schedule message besides the server's Nats-Schedule ones.
// The server copies them onto every fire.
const (
	hdrJobID      = "Nanofleet-Job-Id"
	hdrJobSpec    = "Nanofleet-Job-Spec"
	hdrJobCreated = "Nanofleet-Job-Created"
	hdrJobSession = "Nanofleet-Job-Session"
)

// JetStream error codes of rejected schedules.
const (
	errCodePatternInvalid  = 10189
	errCodeTimeZoneInvalid = 10223
)

var jobIDSyntax = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// StreamName is the name of the fleet's schedule stream.
func StreamName(sp subject.Space) string { return sp.Bucket("SCHED") }

// Assets declares the schedule stream for [bus.Provision].
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.Assets{Streams: []jetstream.StreamConfig{{
		Name:        StreamName(sp),
		Description: "scheduled jobs (message schedules) and their fires",
		Subjects:    []string{sp.ScheduleAll()},
		Retention:   jetstream.LimitsPolicy,
		// One schedule per job subject; one pending fire per job: fires
		// missed while no relay ran are coalesced, not replayed in bulk.
		MaxMsgsPerSubject: 1,
		AllowMsgSchedules: true,
		AllowDirect:       true,
		MaxMsgSize:        l.MaxMsgSize,
	}}}
}

// Job is one scheduled job.
type Job struct {
	// ID is unique in the fleet for practical purposes (a hash); set it
	// only for system jobs with a fixed id such as the heartbeat.
	ID string
	// SessionKey is the session a fire runs in; Channel and ChatID the
	// chat its reply goes to.
	SessionKey string
	Channel    string
	ChatID     string
	// Message is what the agent should do when the job fires.
	Message string
	Spec    Spec
	// Kind of the inbound message a fire becomes; CRON when unset.
	Kind nanofleetv1.InboundKind
	// SenderID is who made the job (the sender of the turn that asked
	// for it): its fires are that user's turns, counted against their
	// token budget and given their memory scope. Empty: "cron", the
	// fleet's own (the heartbeat's is "heartbeat").
	SenderID string
	// Group says the job was made in a group chat: its fires carry
	// is_group, so that user-scoped memory stays out of them as it stays
	// out of the group's other turns.
	Group bool
	// Created is when the job was stored.
	Created time.Time
	// Next is the next fire time as of the last read; zero if unknown.
	Next time.Time
}

// JobID derives a short job id from parts (e.g. session, turn, message,
// spec): the same parts give the same id, so a retried turn does not
// create a second job.
func JobID(parts ...string) string {
	return bus.StableID(parts...)
}

// specJSON is the stored form of a Spec.
type specJSON struct {
	At    string `json:"at,omitempty"`
	Every string `json:"every,omitempty"`
	Cron  string `json:"cron,omitempty"`
	TZ    string `json:"tz,omitempty"`
}

func encodeSpec(s Spec) string {
	j := specJSON{Cron: s.Cron, TZ: s.TZ}
	if !s.At.IsZero() {
		j.At = s.At.Format(time.RFC3339Nano)
	}
	if s.Every != 0 {
		j.Every = s.Every.String()
	}
	b, _ := json.Marshal(j)
	return string(b)
}

func decodeSpec(v string) (Spec, error) {
	var j specJSON
	if err := json.Unmarshal([]byte(v), &j); err != nil {
		return Spec{}, fmt.Errorf("job spec %q: %w", v, err)
	}
	s := Spec{Cron: j.Cron, TZ: j.TZ}
	var err error
	if j.At != "" {
		if s.At, err = time.Parse(time.RFC3339Nano, j.At); err != nil {
			return Spec{}, fmt.Errorf("job spec at: %w", err)
		}
	}
	if j.Every != "" {
		if s.Every, err = time.ParseDuration(j.Every); err != nil {
			return Spec{}, fmt.Errorf("job spec every: %w", err)
		}
	}
	return s, nil
}

// Scheduler stores and reads jobs.
type Scheduler struct {
	b      *bus.Bus
	stream jetstream.Stream
	now    func() time.Time
}

// Open returns the scheduler of b's fleet; [Assets] must have been provisioned.
func Open(ctx context.Context, b *bus.Bus) (*Scheduler, error) {
	st, err := b.JS.Stream(ctx, StreamName(b.Space))
	if err != nil {
		return nil, fmt.Errorf("schedule stream %s: %w", StreamName(b.Space), err)
	}
	return &Scheduler{b: b, stream: st, now: time.Now}, nil
}

// Add validates j and stores it as a message schedule, replacing a job
// with the same session and id. It returns the job as stored, with its
// id, creation time and next fire time.
func (s *Scheduler) Add(ctx context.Context, j Job) (Job, error) {
	now := s.now()
	if j.SessionKey == "" || j.Channel == "" || j.ChatID == "" {
		return Job{}, fmt.Errorf("%w: a job needs a session, a channel and a chat", ErrInvalidSchedule)
	}
	if err := j.Spec.Validate(now); err != nil {
		return Job{}, err
	}
	if j.Kind == nanofleetv1.InboundKind_INBOUND_KIND_UNSPECIFIED {
		j.Kind = nanofleetv1.InboundKind_INBOUND_KIND_CRON
	}
	if j.ID == "" {
		j.ID = JobID(j.SessionKey, j.Message, encodeSpec(j.Spec), now.String())
	}
	if !jobIDSyntax.MatchString(j.ID) {
		return Job{}, fmt.Errorf("%w: job id %q: want 1-64 letters, digits, '-' or '_'", ErrInvalidSchedule, j.ID)
	}
	pattern, tz, err := j.Spec.headers()
	if err != nil {
		return Job{}, err
	}
	j.Created = now
	data, err := proto.Marshal(j.template())
	if err != nil {
		return Job{}, fmt.Errorf("encode job %s: %w", j.ID, err)
	}
	m := bus.Schedule{Pattern: pattern, Target: s.b.Space.ScheduleFire(j.SessionKey, j.ID), TimeZone: tz}.Msg(s.b.Space.ScheduleJob(j.SessionKey, j.ID), data)
	m.Header.Set(hdrJobID, j.ID)
	m.Header.Set(hdrJobSession, j.SessionKey)
	m.Header.Set(hdrJobSpec, encodeSpec(j.Spec))
	m.Header.Set(hdrJobCreated, now.UTC().Format(time.RFC3339Nano))
	if _, err := bus.PublishMsg(ctx, s.b.JS, m); err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) {
			switch apiErr.ErrorCode {
			case errCodePatternInvalid:
				return Job{}, fmt.Errorf("%w: the server rejected %q: %w", ErrInvalidSchedule, pattern, err)
			case errCodeTimeZoneInvalid:
				return Job{}, fmt.Errorf("%w: the server rejected %q: %w", ErrUnknownTimeZone, tz, err)
			}
		}
		return Job{}, fmt.Errorf("store job %s: %w", j.ID, err)
	}
	// Purge a pending fire of an earlier job with this id.
	if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.b.Space.ScheduleFire(j.SessionKey, j.ID))); err != nil {
		return Job{}, fmt.Errorf("store job %s: clear old fire: %w", j.ID, err)
	}
	j.Next = j.next(now, time.Time{}, now)
	return j, nil
}

// template is the InboundMessage a fire of j carries.
func (j Job) template() *nanofleetv1.InboundMessage {
	in := &nanofleetv1.InboundMessage{
		Channel:  j.Channel,
		ChatId:   j.ChatID,
		SenderId: cmp.Or(j.SenderID, "cron"),
		Content:  j.Message,
		Kind:     j.Kind,
		Metadata: map[string]string{MetaJobID: j.ID},
	}
	if j.Group {
		in.Metadata[metakey.IsGroup] = "true"
	}
	if j.SessionKey != session.Key(j.Channel, j.ChatID) {
		in.SessionKey = j.SessionKey
	}
	if j.Kind == nanofleetv1.InboundKind_INBOUND_KIND_HEARTBEAT {
		in.SenderId = "heartbeat"
	}
	return in
}

// next computes the next fire after now. lastNext is the
// Nats-Schedule-Next of the job's latest fire (zero if none); stored is
// when the schedule was stored.
func (j Job) next(now, lastNext, stored time.Time) time.Time {
	if j.Spec.Every == 0 {
		t, ok := j.Spec.nextAfter(now)
		if !ok {
			return time.Time{}
		}
		return t
	}
	// The server's first fire is at the stored time rounded to the second
	// plus the interval, then every interval.
	base := stored.UTC().Round(time.Second).Add(j.Spec.Every)
	if !lastNext.IsZero() && lastNext.After(stored) {
		base = lastNext
	}
	if !base.After(now) {
		k := now.Sub(base)/j.Spec.Every + 1
		base = base.Add(k * j.Spec.Every)
	}
	return base
}

// decodeJob reads a stored schedule message.
func decodeJob(m *jetstream.RawStreamMsg) (Job, error) {
	in := &nanofleetv1.InboundMessage{}
	if err := proto.Unmarshal(m.Data, in); err != nil {
		return Job{}, fmt.Errorf("decode job %s: %w", m.Subject, err)
	}
	spec, err := decodeSpec(m.Header.Get(hdrJobSpec))
	if err != nil {
		return Job{}, fmt.Errorf("decode job %s: %w", m.Subject, err)
	}
	j := Job{
		ID:         m.Header.Get(hdrJobID),
		SessionKey: m.Header.Get(hdrJobSession),
		Channel:    in.GetChannel(),
		ChatID:     in.GetChatId(),
		Message:    in.GetContent(),
		Spec:       spec,
		Kind:       in.GetKind(),
		Group:      in.GetMetadata()[metakey.IsGroup] == "true",
	}
	if s := in.GetSenderId(); s != "cron" && s != "heartbeat" {
		j.SenderID = s
	}
	j.Created, _ = time.Parse(time.RFC3339Nano, m.Header.Get(hdrJobCreated))
	return j, nil
}

// Get returns the session's job with id, or ErrNotFound.
func (s *Scheduler) Get(ctx context.Context, sessionKey, id string) (Job, error) {
	if !jobIDSyntax.MatchString(id) {
		return Job{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return s.read(ctx, s.b.Space.ScheduleJob(sessionKey, id))
}

func (s *Scheduler) read(ctx context.Context, subj string) (Job, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Job{}, fmt.Errorf("%w: %s", ErrNotFound, subj)
	}
	if err != nil {
		return Job{}, fmt.Errorf("read job %s: %w", subj, err)
	}
	j, err := decodeJob(m)
	if err != nil {
		return Job{}, err
	}
	var lastNext time.Time
	if j.Spec.Every != 0 {
		if f, err := s.stream.GetLastMsgForSubject(ctx, s.b.Space.ScheduleFire(j.SessionKey, j.ID)); err == nil && f.Time.After(m.Time) {
			lastNext, _ = bus.NextFire(f.Header)
		}
	}
	j.Next = j.next(s.now(), lastNext, m.Time)
	return j, nil
}

// List returns the session's jobs by next fire time; with an empty
// session key, every job of the fleet.
func (s *Scheduler) List(ctx context.Context, sessionKey string) ([]Job, error) {
	return s.list(ctx, s.b.Space.ScheduleJobs(sessionKey))
}

func (s *Scheduler) list(ctx context.Context, filter string) ([]Job, error) {
	info, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	jobs := make([]Job, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		j, err := s.read(ctx, subj)
		if errors.Is(err, ErrNotFound) {
			continue // fired or removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	slices.SortFunc(jobs, func(a, b Job) int {
		if c := a.Next.Compare(b.Next); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return jobs, nil
}

// Find returns the session's job id; with an empty session key, the
// fleet's only job with that id (ErrAmbiguous when several sessions have
// one).
func (s *Scheduler) Find(ctx context.Context, sessionKey, id string) (Job, error) {
	if !jobIDSyntax.MatchString(id) {
		return Job{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if sessionKey != "" {
		return s.Get(ctx, sessionKey, id)
	}
	jobs, err := s.list(ctx, s.b.Space.ScheduleJobsNamed(id))
	if err != nil {
		return Job{}, err
	}
	switch len(jobs) {
	case 0:
		return Job{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	case 1:
		return jobs[0], nil
	default:
		return Job{}, fmt.Errorf("%w: %s is in %d sessions; give the session", ErrAmbiguous, id, len(jobs))
	}
}

// Remove deletes the session's job id; with an empty session key, the
// fleet's only job with that id. It returns the removed job. A fire of the
// job already produced but not yet relayed is dropped by the relay.
func (s *Scheduler) Remove(ctx context.Context, sessionKey, id string) (Job, error) {
	j, err := s.Find(ctx, sessionKey, id)
	if err != nil {
		return Job{}, err
	}
	for _, subj := range []string{s.b.Space.ScheduleJob(j.SessionKey, j.ID), s.b.Space.ScheduleFire(j.SessionKey, j.ID), s.b.Space.ScheduleRelayed(j.SessionKey, j.ID)} {
		if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return Job{}, fmt.Errorf("remove job %s: %w", j.ID, err)
		}
	}
	return j, nil
}
