package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Metadata keys a fire sets on its InboundMessage.
const (
	// MetaJobID is the id of the job that fired.
	MetaJobID = "job_id"
	// MetaFiredAt is the fire time, RFC 3339.
	MetaFiredAt = "fired_at"
)

// RelayConsumer is the durable consumer all relays share.
const RelayConsumer = "sched_relay"

// PrepareFunc may rewrite a fire's inbound message before it is published
// (e.g. the heartbeat fills in HEARTBEAT.md's tasks); false skips the fire.
type PrepareFunc func(ctx context.Context, in *nanofleetv1.InboundMessage) (publish bool, err error)

// Relay turns fires into inbound messages. Any number of relays may run:
// they share one durable consumer, so each fire is relayed by one of them.
type Relay struct {
	b       *bus.Bus
	log     *slog.Logger
	cons    jetstream.Consumer
	stream  jetstream.Stream
	inbound jetstream.Stream
	prepare []PrepareFunc
}

// RelayOption configures a Relay.
type RelayOption func(*Relay) error

// WithPrepare adds a hook run on every fire before it is published, in
// the order given.
func WithPrepare(f PrepareFunc) RelayOption {
	return func(r *Relay) error {
		if f == nil {
			return fmt.Errorf("%w: nil prepare hook", ErrInvalidOption)
		}
		r.prepare = append(r.prepare, f)
		return nil
	}
}

// WithLogger sets the relay's logger; the default, and nil, discard.
func WithLogger(l *slog.Logger) RelayOption {
	return func(r *Relay) error {
		r.log = observe.OrDiscard(l).With("component", "schedule-relay")
		return nil
	}
}

// NewRelay creates or updates the relays' shared consumer.
func NewRelay(ctx context.Context, b *bus.Bus, opts ...RelayOption) (*Relay, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: bus is required", ErrInvalidOption)
	}
	r := &Relay{b: b, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		if err := o(r); err != nil {
			return nil, err
		}
	}
	st, err := b.JS.Stream(ctx, StreamName(b.Space))
	if err != nil {
		return nil, fmt.Errorf("schedule relay: stream: %w", err)
	}
	cons, err := b.JS.CreateOrUpdateConsumer(ctx, StreamName(b.Space), jetstream.ConsumerConfig{
		Durable:       RelayConsumer,
		Description:   "turns job fires into inbound messages",
		FilterSubject: b.Space.ScheduleFireAll(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("schedule relay: consumer: %w", err)
	}
	in, err := b.JS.Stream(ctx, b.Space.InboundStream())
	if err != nil {
		return nil, fmt.Errorf("schedule relay: inbound stream: %w", err)
	}
	r.stream, r.cons, r.inbound = st, cons, in
	return r, nil
}

// Run relays fires until ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	cc, err := r.cons.Consume(func(m jetstream.Msg) { r.handle(ctx, m) },
		jetstream.PullMaxMessages(16),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if ctx.Err() == nil && !errors.Is(err, jetstream.ErrNoHeartbeat) {
				r.log.Debug("consume fires", "err", err)
			}
		}))
	if err != nil {
		return fmt.Errorf("schedule relay: consume: %w", err)
	}
	<-ctx.Done()
	cc.Drain()
	<-cc.Closed()
	return nil
}

// handle relays one fire; publish-then-ack with a deterministic
// Nats-Msg-Id makes a redelivered fire a duplicate the inbound stream drops.
func (r *Relay) handle(ctx context.Context, m jetstream.Msg) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	meta, err := m.Metadata()
	if err != nil {
		_ = m.Term()
		return
	}
	in := &nanofleetv1.InboundMessage{}
	if err := proto.Unmarshal(m.Data(), in); err != nil || in.GetChannel() == "" || in.GetChatId() == "" {
		r.drop(ctx, m, fmt.Sprintf("fire is not a job's InboundMessage (decode: %v)", err))
		return
	}
	id := m.Headers().Get(hdrJobID)
	log := r.log.With("job", id, "session", m.Headers().Get(hdrJobSession))
	// A repeating job's fire produced just before the job was removed:
	// the job is gone, so is the fire. (A one-time job's schedule is purged
	// by its own fire, hence the purge marker exception.)
	if sched := m.Headers().Get(bus.HeaderScheduler); sched != "" && m.Headers().Get(bus.HeaderScheduleNext) != bus.ScheduleNextPurge {
		if _, err := r.stream.GetLastMsgForSubject(ctx, sched); errors.Is(err, jetstream.ErrMsgNotFound) {
			log.Info("fire of a removed job dropped")
			_ = m.Ack()
			return
		}
	}
	session := m.Headers().Get(hdrJobSession)
	if r.waiting(ctx, session, id) {
		// The job's last fire has not had its turn yet: this one joins it,
		// as a job's fires wait for each other while no relay runs. Else a
		// job firing faster than its turns (50 jobs every second, a model
		// taking two) piled up fires without end, and waiting messages
		// held every slot of the workers' consumer (MaxAckPending): no
		// other session's message was taken any more.
		log.Debug("fire skipped: the job's last fire still waits for its turn")
		_ = m.Ack()
		return
	}
	fired := meta.Timestamp
	in.Id = fmt.Sprintf("sched:%s:%s:%d", subject.Token(session), id, fired.Unix())
	in.ReceivedAt = timestamppb.New(fired)
	if in.Metadata == nil {
		in.Metadata = map[string]string{}
	}
	in.Metadata[MetaFiredAt] = fired.UTC().Format(time.RFC3339)
	if in.GetKind() == nanofleetv1.InboundKind_INBOUND_KIND_CRON {
		spec, _ := decodeSpec(m.Headers().Get(hdrJobSpec))
		in.Content = FireContent(id, spec, fired, in.GetContent())
	}
	for _, p := range r.prepare {
		ok, err := p(ctx, in)
		if err != nil {
			log.Warn("prepare fire", "err", err)
			_ = m.NakWithDelay(time.Second)
			return
		}
		if !ok {
			log.Debug("fire skipped")
			_ = m.Ack()
			return
		}
	}
	data, err := proto.Marshal(in)
	if err != nil {
		r.drop(ctx, m, "encode inbound: "+err.Error())
		return
	}
	out := nats.NewMsg(r.b.Space.Inbound(in.GetChannel(), in.GetChatId()))
	out.Data = data
	out.Header.Set(nats.MsgIdHdr, in.GetId())
	ack, err := bus.PublishMsg(ctx, r.b.JS, out)
	if err != nil {
		log.Warn("relay fire", "err", err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	// The record is what holds the job's next fire back while this one
	// waits (waiting). Unrecorded, the fire comes back: its inbound
	// message is then a duplicate the stream drops, whose ack still gives
	// the sequence to record.
	rec := nats.NewMsg(r.b.Space.ScheduleRelayed(session, id))
	rec.Data = []byte(strconv.FormatUint(ack.Sequence, 10))
	rec.Header.Set(nats.MsgIdHdr, "relayed:"+in.GetId())
	if _, err := bus.PublishMsg(ctx, r.b.JS, rec); err != nil {
		log.Warn("record relayed fire", "err", err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	log.Debug("fire relayed", "inbound", in.GetId())
	_ = m.Ack()
}

// waiting reports whether the last fire relayed for the session's job
// is still in the inbound stream: a work queue, from which a message goes
// when its turn is done. When that cannot be read, the fire is relayed.
func (r *Relay) waiting(ctx context.Context, session, id string) bool {
	rec, err := r.stream.GetLastMsgForSubject(ctx, r.b.Space.ScheduleRelayed(session, id))
	if err != nil {
		return false
	}
	seq, err := strconv.ParseUint(string(rec.Data), 10, 64)
	if err != nil {
		return false
	}
	_, err = r.inbound.GetMsg(ctx, seq)
	return err == nil
}

func (r *Relay) drop(ctx context.Context, m jetstream.Msg, reason string) {
	err := r.b.DeadLetter(ctx, "schedule", bus.LetterOf(m, reason))
	if err != nil {
		r.log.Error("dead-letter fire", "err", err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	r.log.Warn("fire dead-lettered", "subject", m.Subject(), "reason", reason)
	_ = m.Term()
}

// FireContent is the text a cron job's turn starts with.
func FireContent(id string, spec Spec, fired time.Time, message string) string {
	return fmt.Sprintf("[Scheduled task %s fired at %s (%s)]\nDo this now and answer the user with the result:\n%s",
		id, fired.In(spec.displayLocation()).Format(time.RFC3339), spec, message)
}
