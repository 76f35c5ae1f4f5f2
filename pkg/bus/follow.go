package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/observe"
)

// followHeartbeat is the idle heartbeat of a [Follower]'s consumer.
// nats.go makes an ordered consumer again only after two missed
// heartbeats; the "server shutdown" status a node sends its pending pulls
// as it stops does not do it. At nats.go's default of 5 s, whoever waited
// on a consumer held by a node that shut down got nothing for 10 s; at
// 1 s, 2 s. The price is one heartbeat a second per idle consumer.
const followHeartbeat = time.Second

// followInactive is how long the server keeps a Follower's consumer
// after its last pull when the config does not say. Stop deletes the
// consumer, so this reaps only those of a client that crashed or whose
// delete was lost; at nats.go's default, 5 min, a worker that crashed
// while a subagent's result wait followed the outbound stream left that
// consumer behind as long. A Follower makes its consumer again after a
// reconnect, so one reaped while its client was away costs nothing.
const followInactive = 30 * time.Second

// A Follower hands the messages of an ordered consumer to its handler,
// in stream order, and makes the consumer again itself, from the message
// after the last one handed over, when its connection reconnects or its
// heartbeats stop. nats.go makes an ordered consumer again too, but each
// try waits 10 s, and the first one after a reconnect, sent while the
// meta leadership moved off the node that went down, was never
// answered: a CLI client connected to that node got the reply stored
// meanwhile 11 s after the stop. The Follower's tries take [RequestTry].
type Follower struct {
	b      *Bus
	stream string
	cfg    jetstream.OrderedConsumerConfig
	handle func(jetstream.Msg)
	log    *slog.Logger

	remake chan struct{} // heartbeats missed: make the consumer again
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	gen  int        // consumers made; messages of an earlier one are dropped
	cur  *following // the consumer being consumed
	next uint64     // stream sequence after the last message handed over; 0: none yet
}

// following is one consumer a [Follower] made and consumes.
type following struct {
	cc      jetstream.ConsumeContext
	cons    jetstream.Consumer
	once    sync.Once
	retired chan struct{} // closed once cc stopped and the consumer's delete ended
}

// Follow makes an ordered consumer of stream with cfg and hands each of
// its messages to handle, one at a time, until [Follower.Stop]. The
// creation is tried again while it fails for a transient reason, until
// ctx ends. log (nil: discarded) hears of consumers made again. A zero
// cfg.InactiveThreshold is 30 s.
func (b *Bus) Follow(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig, handle func(jetstream.Msg), log *slog.Logger) (*Follower, error) {
	cfg.InactiveThreshold = cmp.Or(cfg.InactiveThreshold, followInactive)
	f := &Follower{b: b, stream: stream, cfg: cfg, handle: handle, log: observe.OrDiscard(log),
		remake: make(chan struct{}, 1), done: make(chan struct{})}
	// Listening before the consumer is made: a reconnect in between
	// is not missed.
	status := b.NC.StatusChanged(nats.CONNECTED)
	if err := f.consume(ctx); err != nil {
		b.NC.RemoveStatusListener(status)
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.cancel = cancel
	go f.run(rctx, status)
	return f, nil
}

// Stop stops handing messages over and deletes the consumer on the
// server, waiting at most [RequestTry] in all, even when ctx has ended: a
// stopped ordered consumer stays there until it has been inactive for its
// InactiveThreshold, and busy callers would pile them up. While nats.go's own attempt to make the consumer again
// holds the stop (up to 10 s), the delete waits for it in the background
// (see [Follower.retire]).
func (f *Follower) Stop(ctx context.Context) {
	f.cancel()
	<-f.done
	f.mu.Lock()
	f.gen++ // whatever the last consumer still delivers is dropped
	cur := f.cur
	f.mu.Unlock()
	wait := time.NewTimer(RequestTry)
	defer wait.Stop()
	select {
	case <-f.retire(ctx, cur):
	case <-wait.C:
	}
}

// retire stops consuming fl and then deletes its consumer, in the
// background and once, however often it is asked: a consumer replaced
// after a reconnect, or the last one at Stop. It is deleted only once
// nats.go has stopped consuming it: deleted under a live pull, it was
// made again under a new name (a CI run: "consumer …_2 left"). A second
// cc.Stop returns at once while the first still waits for nats.go's own
// attempt to make the consumer again, so a delete that followed it went
// out before that attempt ended, into the connection it hung on, and
// left the consumer for its InactiveThreshold; the delete is tried again
// within [CallTimeout] for the same reason.
func (f *Follower) retire(ctx context.Context, fl *following) <-chan struct{} {
	fl.once.Do(func() {
		go func() {
			defer close(fl.retired)
			fl.cc.Stop() // waits for nats.go's own attempt, if one runs
			// Tried again while the connection is lost or hung: the
			// connection that made nats.go make the consumer again is
			// often the one the delete would go out on.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CallTimeout)
			defer cancel()
			if err := f.b.DeleteConsumer(ctx, f.stream, fl.cons); err != nil {
				f.log.Debug("follow: consumer not deleted; the server reaps it", "err", err)
			}
		}()
	})
	return fl.retired
}

// DeleteConsumer deletes from stream the server consumer of cons (of an
// ordered consumer, the one it made last: nats.go makes a new one at each
// reset and deletes the one before), trying again while the delete fails
// for a transient reason, until ctx ends. Without it a client's consumer
// stays on the server for its InactiveThreshold. Stop consuming cons
// first: deleted under a live pull, nats.go makes an ordered consumer
// again under a new name.
func (b *Bus) DeleteConsumer(ctx context.Context, stream string, cons jetstream.Consumer) error {
	info := cons.CachedInfo()
	if info == nil {
		return nil // never made on the server
	}
	err := RetryEach(ctx, backoff.Backoff{}, RequestTry, func(ctx context.Context) error {
		return b.JS.DeleteConsumer(ctx, stream, info.Name)
	}, nil)
	if err != nil {
		return fmt.Errorf("delete consumer %s of %s: %w", info.Name, stream, err)
	}
	return nil
}

func (f *Follower) run(ctx context.Context, status chan nats.Status) {
	defer close(f.done)
	defer f.b.NC.RemoveStatusListener(status)
	for {
		select {
		case <-ctx.Done():
			return
		case <-status:
			f.log.Debug("follow: reconnected; making the consumer again", "stream", f.stream)
		case <-f.remake:
			f.log.Debug("follow: heartbeats missed; making the consumer again", "stream", f.stream)
		}
		if err := f.consume(ctx); err != nil && ctx.Err() == nil {
			// Not transient (the stream is gone): nothing to follow.
			f.log.Warn("follow: consumer not made again", "stream", f.stream, "err", err)
			return
		}
	}
}

// consume makes a consumer starting after the last message handed over
// (at cfg's start before any) and consumes it, stopping the one before.
func (f *Follower) consume(ctx context.Context) error {
	f.mu.Lock()
	f.gen++
	gen, old, cfg := f.gen, f.cur, f.cfg
	if f.next > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = jetstream.DeliverByStartSequencePolicy, f.next, nil
	}
	f.mu.Unlock()
	if old != nil {
		f.retire(ctx, old)
	}
	var cons jetstream.Consumer
	err := RetryEach(ctx, backoff.Backoff{}, RequestTry, func(ctx context.Context) error {
		c, err := f.b.JS.OrderedConsumer(ctx, f.stream, cfg)
		cons = c
		return err
	}, func(err error, wait time.Duration) {
		f.log.Warn("follow: consumer not made, trying again", "stream", f.stream, "err", err, "wait", wait)
	})
	if err != nil {
		return fmt.Errorf("follow %s: %w", f.stream, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) { f.deliver(gen, m) },
		jetstream.PullHeartbeat(followHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			f.log.Debug("follow: consumer", "stream", f.stream, "err", err)
			if errors.Is(err, jetstream.ErrNoHeartbeat) && f.current(gen) {
				select {
				case f.remake <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		return fmt.Errorf("follow %s: consume: %w", f.stream, err)
	}
	f.mu.Lock()
	f.cur = &following{cc: cc, cons: cons, retired: make(chan struct{})}
	f.mu.Unlock()
	return nil
}

func (f *Follower) current(gen int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return gen == f.gen
}

// deliver hands m over unless an earlier consumer delivered it, or its
// consumer has been replaced.
func (f *Follower) deliver(gen int, m jetstream.Msg) {
	f.mu.Lock()
	if gen != f.gen {
		f.mu.Unlock()
		return
	}
	if md, err := m.Metadata(); err == nil {
		if md.Sequence.Stream < f.next {
			f.mu.Unlock()
			return
		}
		f.next = md.Sequence.Stream + 1
	}
	f.mu.Unlock()
	f.handle(m)
}
