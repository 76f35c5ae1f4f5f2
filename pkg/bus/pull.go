package bus

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/observe"
)

// Pull runs handle for each message of cons, each in a goroutine of its
// own and at most slots at a time, until ctx ends. It fetches only as many
// messages as it has free slots, so that a message is never held by a
// process that cannot start it while another process could.
//
// When ctx ends, messages of a fetch that still arrive are nak'ed, so that
// another process takes them within a second rather than after their ack
// wait (see [Take]).
// Pull does not wait for running handlers: the caller does, with wait,
// after its own shutdown grace if it has one. A failed fetch is logged
// and tried again; it never ends the loop.
func Pull(ctx context.Context, cons jetstream.Consumer, slots int, log *slog.Logger, handle func(jetstream.Msg)) (wait func()) {
	return PullReleasing(ctx, cons, slots, log, func(m jetstream.Msg, _ func()) { handle(m) })
}

// PullReleasing is [Pull] for a handler that may give its slot back before
// it returns: handle gets release, which frees the message's slot at once
// (later calls do nothing), so that Pull fetches another message. It is
// for a handler that goes on only waiting on work other handlers do (a
// group commit's waiters): the message stays unacknowledged until handle
// returns, and a released slot is never taken back, so the caller bounds
// how many it releases.
func PullReleasing(ctx context.Context, cons jetstream.Consumer, slots int, log *slog.Logger, handle func(m jetstream.Msg, release func())) (wait func()) {
	sem := make(chan struct{}, slots)
	// A consumer deleted for good fails every fetch: one warning per
	// interval, each failure at debug level.
	warn := observe.NewThrottled(log, observe.ThrottleEvery)
	var wg sync.WaitGroup
	for ctx.Err() == nil {
		// Wait for at least one free slot.
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		free := 1 + slots - len(sem)
		<-sem
		// FetchMaxWait, not a context: a fetch given a context gives up
		// on the client a tenth of the wait after the server's expiry,
		// and a message the server sent in between (a busy machine's
		// scheduling delay is enough) is lost to this process until its
		// ack wait. With many free slots a fetch rarely fills and nearly
		// always runs to its expiry, so this happened every second (the
		// bench saw p99 31 s at 1,000 sessions). Without a context
		// nats.go waits for the server's end-of-request.
		batch, err := cons.Fetch(free, jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			fetchFailed(ctx, log, warn, err)
			continue
		}
		Take(ctx, batch.Messages(), fetchWait, func(m jetstream.Msg) {
			sem <- struct{}{} // never blocks: at most free messages arrive
			wg.Add(1)
			go func() {
				var once sync.Once
				release := func() { once.Do(func() { <-sem }) }
				defer func() { release(); wg.Done() }()
				handle(m, release)
			}()
		})
		// A fetch the server ended at once (no responders while the
		// consumer is gone or has no leader, a leader change) pauses
		// too: fetching again at once spun at 20,000 requests a second.
		if err := batch.Error(); err != nil {
			fetchFailed(ctx, log, warn, err)
		}
	}
	return wg.Wait
}

// fetchWait is how long a fetch of [Pull] waits for messages.
const fetchWait = time.Second

// Take starts each message of a fetch until the fetch ends or ctx does.
// A fetch bounded by FetchMaxWait (see Pull) does not end with ctx, and
// stopping must not wait for its expiry (a one-shot `agent -m` would spend
// its last seconds on it): what still arrives is nak'ed with a delay of
// wait, the fetch's FetchMaxWait, so that the server gives it again only
// once the fetch has expired. Nak'ed without a delay, a message came
// straight back to the same fetch while the fetch had room, and was
// nak'ed again: in milliseconds it used up every delivery its consumer
// allows (MaxDeliver), and no process ever got it (a reply published just
// after a gateway stopped, its connection still open, was never sent).
func Take(ctx context.Context, msgs <-chan jetstream.Msg, wait time.Duration, start func(jetstream.Msg)) {
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return
			}
			start(m)
		case <-ctx.Done():
			go func() {
				for m := range msgs {
					_ = m.NakWithDelay(wait)
				}
			}()
			return
		}
	}
}

// fetchFailed logs a failed fetch and waits a moment before the next
// unless ctx has ended.
func fetchFailed(ctx context.Context, log *slog.Logger, warn *observe.Throttled, err error) {
	if ctx.Err() != nil {
		return
	}
	log.Debug("fetch failed", "err", err)
	warn.Warn("fetch failed; trying again every 250 ms", "err", err)
	_ = backoff.Sleep(ctx, 250*time.Millisecond)
}
