package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// deliveredTTL is how long delivered reply ids are remembered: far longer
// than a reply is ever redelivered.
const deliveredTTL = 24 * time.Hour

// BucketDelivered is the short name of the bucket of delivered reply
// ids. Its keys starting "id-" and "seq-" are the gateway's; an adapter
// may keep records of its own there under another prefix (internal/parts).
const BucketDelivered = "delivered"

// Assets declares the bucket of delivered reply ids for [bus.Provision],
// and the channel status board Run reports to.
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.Join(status.Assets, bus.KeyValue(jetstream.KeyValueConfig{
		Bucket:      BucketDelivered,
		Description: "reply ids already delivered to a platform",
		TTL:         deliveredTTL,
	}))(sp, l)
}

// Gateway runs adapters and moves messages between them and the fleet.
type Gateway struct {
	bus      *bus.Bus
	cfg      Config
	log      *slog.Logger
	adapters []Adapter
	status   *status.Reporter
	// Hooks for metrics; nil means none.
	OnRetry      func(channel string)
	OnDeadLetter func(channel string)
	// Storage, when set, is asked before every publish; an error refuses
	// the message as ErrStorageFull at once. (A full disk makes the
	// server drop the publishes it cannot write unanswered.)
	Storage func() error
}

// Option changes an optional setting of [New].
type Option func(*Gateway)

// WithLogger sets the gateway's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(g *Gateway) { g.log = observe.OrDiscard(l) } }

// WithStatus reports an adapter whose Run failed on this gateway's
// status records through r; without it the failure is only logged.
func WithStatus(r *status.Reporter) Option { return func(g *Gateway) { g.status = r } }

// New returns a gateway for the given adapters; channel names must be
// unique.
func New(cfg Config, b *bus.Bus, adapters []Adapter, opts ...Option) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, a := range adapters {
		if seen[a.Channel()] {
			return nil, fmt.Errorf("gateway: two adapters for channel %q", a.Channel())
		}
		seen[a.Channel()] = true
	}
	g := &Gateway{bus: b, cfg: cfg, log: slog.New(slog.DiscardHandler), adapters: adapters}
	for _, o := range opts {
		o(g)
	}
	return g, nil
}

// Publish stores an inbound message. The platform's event id is the
// message id, so an event the platform sends twice is stored once.
func (g *Gateway) Publish(ctx context.Context, in *nanofleetv1.InboundMessage) error {
	_, err := g.Store(ctx, in)
	return err
}

// Store is [Gateway.Publish] that also reports whether the message was a
// duplicate of one already stored under its id within the inbound
// stream's duplicate window (and so dropped). A store that sent the
// message again after a try went unanswered (lost with a node that shut
// down) reports a duplicate answer as stored, not a duplicate: it most
// likely answers that try, and the API would start a second turn for a
// duplicate first attempt (see [bus.PublishMsg]).
func (g *Gateway) Store(ctx context.Context, in *nanofleetv1.InboundMessage) (duplicate bool, err error) {
	if in.GetId() == "" || in.GetChannel() == "" || in.GetChatId() == "" {
		return false, errors.New("gateway: inbound message needs id, channel and chat_id")
	}
	validUTF8(in.ProtoReflect())
	if in.ReceivedAt == nil {
		in.ReceivedAt = timestamppb.Now()
	}
	if in.Kind == nanofleetv1.InboundKind_INBOUND_KIND_UNSPECIFIED {
		in.Kind = nanofleetv1.InboundKind_INBOUND_KIND_USER
	}
	if n := len(in.GetContent()); n > g.cfg.MaxContentBytes {
		return false, fmt.Errorf("inbound %s: %w", in.GetId(), &TooLargeError{Size: n, Limit: g.cfg.MaxContentBytes})
	}
	if g.Storage != nil {
		if err := g.Storage(); err != nil {
			return false, fmt.Errorf("inbound %s: %w", in.GetId(), storageFull{err})
		}
	}
	data, err := proto.Marshal(in)
	if err != nil {
		return false, fmt.Errorf("encode inbound: %w", err)
	}
	msg := nats.NewMsg(g.bus.Space.Inbound(in.GetChannel(), in.GetChatId()))
	msg.Data = data
	msg.Header.Set(nats.MsgIdHdr, in.GetChannel()+":"+in.GetId())
	// Bounded: a server that cannot write does not answer, and the
	// caller (an HTTP request, a platform's webhook) must hear back; a
	// stream electing a leader (a node died) is waited for.
	ack, err := bus.PublishMsg(ctx, g.bus.JS, msg)
	if err != nil {
		switch {
		case bus.StorageFull(err):
			return false, fmt.Errorf("publish inbound %s: %w: %w", in.GetId(), ErrStorageFull, err)
		case bus.TooLarge(err):
			return false, fmt.Errorf("publish inbound %s: %w: %w", in.GetId(), ErrTooLarge, err)
		}
		// A disk that filled at once (another process's file) fails the
		// publish before the guard's next look at it: asked again, it
		// names the cause, which "not reachable" did not.
		if g.Storage != nil {
			if serr := g.Storage(); serr != nil {
				return false, fmt.Errorf("publish inbound %s: %w (%w)", in.GetId(), storageFull{serr}, err)
			}
		}
		return false, fmt.Errorf("publish inbound %s: %w", in.GetId(), err)
	}
	return ack.Duplicate, nil
}

// refusing is the inbox the adapters get: a message the fleet refuses
// (storage full, too large) is answered on the platform at once, straight
// through the adapter, since the reply could not be stored either; the
// adapter sees success, so the platform does not send the event again.
func (g *Gateway) refusing(a Adapter) Inbox {
	return InboxFunc(func(ctx context.Context, in *nanofleetv1.InboundMessage) error {
		err := g.Publish(ctx, in)
		text := RefusalText(err)
		if text == "" {
			return err
		}
		g.log.Warn("inbound message refused", "channel", in.GetChannel(), "chat", in.GetChatId(), "err", err)
		out := &nanofleetv1.OutboundMessage{
			Id: "refused:" + in.GetId(), Channel: in.GetChannel(), ChatId: in.GetChatId(), Content: text,
			Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR, ReplyTo: in.GetId(), Metadata: in.GetMetadata(),
			LastOfTurn: true, CreatedAt: timestamppb.Now(),
		}
		if derr := a.Deliver(ctx, out); derr != nil {
			return fmt.Errorf("%w (and the refusal was not delivered: %w)", err, derr)
		}
		return nil
	})
}

// Run starts every adapter and its delivery loops, and returns when ctx
// ends or one of them fails.
func (g *Gateway) Run(ctx context.Context) error {
	var delivered jetstream.KeyValue
	err := g.setUp(ctx, func(ctx context.Context) (err error) {
		delivered, err = g.bus.KV(ctx, BucketDelivered)
		return err
	})
	if err != nil {
		return fmt.Errorf("gateway: delivered bucket: %w", err)
	}
	eg, ctx := errgroup.WithContext(ctx)
	for _, a := range g.adapters {
		var cons jetstream.Consumer
		err := g.setUp(ctx, func(ctx context.Context) (err error) {
			cons, err = g.consumer(ctx, a.Channel())
			return err
		})
		if err != nil {
			return err
		}
		// Live messages are followed before the adapter takes its first
		// event: progress of a turn that event starts must not be
		// published to nobody.
		d := &deliverer{g: g, a: a, cons: cons, delivered: delivered, log: g.log.With("channel", a.Channel())}
		if la, ok := a.(LiveAdapter); ok {
			q, unsubscribe, err := g.followLive(ctx, a.Channel(), la)
			if err != nil {
				return err
			}
			defer unsubscribe()
			d.live = q
		}
		eg.Go(func() error { return d.run(ctx) })
		eg.Go(func() error {
			if err := a.Run(ctx, g.refusing(a)); err != nil && ctx.Err() == nil {
				g.status.Failing(ctx, g.log, a.Channel(), err)
				return fmt.Errorf("adapter %s: %w", a.Channel(), err)
			}
			return nil
		})
	}
	return eg.Wait()
}

// setUp runs a bus call of Run's start, retrying it while it fails for a
// transient reason: a cluster electing leaders delays delivery, it does
// not stop the gateway.
func (g *Gateway) setUp(ctx context.Context, call func(context.Context) error) error {
	return bus.RetryEach(ctx, backoff.Backoff{}, bus.CallTimeout, call, func(err error, wait time.Duration) {
		g.log.Warn("gateway: nats not ready; retrying", "err", err, "retry_in", wait)
	})
}

func (g *Gateway) consumer(ctx context.Context, channel string) (jetstream.Consumer, error) {
	cfg := jetstream.ConsumerConfig{
		Durable:       g.bus.Space.GatewayConsumer(channel),
		Description:   "replies for channel " + channel,
		FilterSubject: g.bus.Space.OutboundChannel(channel),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       g.cfg.AckWait,
		// Counted in handle, not by the server: a reply whose attempts all
		// ended without an answer (a gateway stopped or crashed in each)
		// is dead-lettered there, where the server would drop it.
		MaxDeliver:    -1,
		MaxAckPending: g.cfg.Parallel * 4,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	cons, err := g.bus.JS.CreateOrUpdateConsumer(ctx, g.bus.Space.OutboundStream(), cfg)
	if err != nil {
		return nil, fmt.Errorf("gateway consumer for %s: %w", channel, err)
	}
	return cons, nil
}

// deliverer moves one channel's replies to its adapter.
type deliverer struct {
	g         *Gateway
	a         Adapter
	cons      jetstream.Consumer
	delivered jetstream.KeyValue
	live      *liveQueue // nil for an adapter without live messages
	log       *slog.Logger
}

func (d *deliverer) run(ctx context.Context) error {
	bus.Pull(ctx, d.cons, d.g.cfg.Parallel, d.log, func(m jetstream.Msg) { d.handle(ctx, m) })()
	return nil
}

// handle delivers one reply: decode, skip if already delivered, deliver,
// remember, ack; or retry later, or dead-letter.
func (d *deliverer) handle(ctx context.Context, m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		d.log.Error("reply without metadata", "err", err)
		_ = m.Term()
		return
	}
	out := &nanofleetv1.OutboundMessage{}
	if err := proto.Unmarshal(m.Data(), out); err != nil {
		d.deadLetter(ctx, m, fmt.Sprintf("decode outbound: %v", err))
		return
	}
	key := deliveredKey(out.GetId(), meta.Sequence.Stream)
	if _, err := bus.Get(ctx, d.delivered, key); err == nil {
		_ = m.Ack()
		return
	}
	if int(meta.NumDelivered) > d.g.cfg.MaxDeliver {
		d.deadLetter(ctx, m, fmt.Sprintf("%d delivery attempts ended without an answer (a gateway stopped or crashed during each)", d.g.cfg.MaxDeliver))
		return
	}
	// In progress until it is settled: an attempt may outlast the ack
	// wait, and InProgress after a nak would put the retry off to it.
	quiet := bus.InProgress(ctx, m, d.g.cfg.AckWait/4)
	callCtx, cancel := context.WithTimeout(ctx, d.g.cfg.AttemptTimeout)
	if d.live != nil && out.GetLastOfTurn() {
		d.live.end(callCtx, out)
	}
	err = d.a.Deliver(callCtx, out)
	cancel()
	if err == nil {
		// Remembered even when the gateway is stopping: the platform has
		// the reply, and a redelivery must not send it again.
		putCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bus.CallTimeout)
		if _, err := d.delivered.Put(putCtx, key, nil); err != nil {
			d.log.Warn("remember delivered reply", "id", out.GetId(), "err", err)
		}
		cancel()
		quiet()
		_ = m.Ack()
		return
	}
	quiet()
	retry, after := Retryable(err)
	if !retry || int(meta.NumDelivered) >= d.g.cfg.MaxDeliver {
		d.deadLetter(ctx, m, err.Error())
		return
	}
	if after <= 0 {
		after = backoff.Backoff{Min: d.g.cfg.MinBackoff, Max: d.g.cfg.MaxBackoff}.Wait(int(meta.NumDelivered) - 1)
	}
	if d.g.OnRetry != nil {
		d.g.OnRetry(d.a.Channel())
	}
	d.log.Info("delivery failed, will retry", "id", out.GetId(), "attempt", meta.NumDelivered, "after", after, "err", err)
	_ = m.NakWithDelay(after)
}

func (d *deliverer) deadLetter(ctx context.Context, m jetstream.Msg, reason string) {
	err := d.g.bus.DeadLetter(ctx, "outbound", bus.LetterOf(m, reason))
	if err != nil {
		d.log.Error("dead-letter reply", "err", err)
		_ = m.Nak()
		return
	}
	if d.g.OnDeadLetter != nil {
		d.g.OnDeadLetter(d.a.Channel())
	}
	d.log.Warn("reply dead-lettered", "subject", m.Subject(), "reason", reason)
	_ = m.Term()
}

func deliveredKey(id string, seq uint64) string {
	if id == "" {
		return fmt.Sprintf("seq-%d", seq)
	}
	return "id-" + subject.Token(id)
}
