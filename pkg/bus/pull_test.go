package bus_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/observe/observetest"
)

// TestPullHoldsNoMoreThanItsSlots: with every slot busy, Pull has taken
// no message it cannot start (another process could run it), and it
// handles every message once slots free up. The consumer's count right
// after the handlers start can come before a fetch made too early; each
// fetch is therefore also checked when it is made, and read once Pull
// has returned.
func TestPullHoldsNoMoreThanItsSlots(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const messages, slots = 6, 2
	cons := &slotChecked{Consumer: jobs(t, b, messages), slots: slots}
	started := make(chan struct{}, messages)
	release := make(chan struct{})
	var running, most atomic.Int32
	pulled := make(chan func())
	go func() {
		pulled <- bus.Pull(ctx, cons, slots, slog.New(slog.DiscardHandler), func(m jetstream.Msg) {
			n := running.Add(1)
			for {
				if old := most.Load(); n <= old || most.CompareAndSwap(old, n) {
					break
				}
			}
			started <- struct{}{}
			select { // a test that failed early never releases
			case <-release:
			case <-ctx.Done():
			}
			running.Add(-1)
			_ = m.Ack()
			cons.freed.Add(1)
		})
	}()
	waitStarts(t, started, slots, "handlers did not start")
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != slots {
		t.Errorf("%d messages taken with %d slots busy", info.NumAckPending, slots)
	}
	close(release)
	waitStarts(t, started, messages-slots, "not every message was handled")
	if m := most.Load(); m > slots {
		t.Errorf("%d handlers ran at once with %d slots", m, slots)
	}
	cancel()
	bustest.Receive(t, pulled, 10*time.Second)() // Pull returns once its context ended
	if n := cons.over.Load(); n > 0 {
		t.Errorf("%d fetches asked for more messages than Pull had free slots", n)
	}
}

// slotChecked counts the fetches that ask for more messages than there
// are slots free: the messages handed out by earlier fetches whose
// handler still holds its slot, plus those asked for, exceed slots. A
// handler adds to freed just before it gives its slot back (by release
// or by returning), so that no fetch the freed slot allows sees it busy.
type slotChecked struct {
	jetstream.Consumer
	slots              int
	taken, freed, over atomic.Int32
}

func (c *slotChecked) Fetch(n int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	if busy := int(c.taken.Load() - c.freed.Load()); busy+n > c.slots {
		c.over.Add(1)
	}
	batch, err := c.Consumer.Fetch(n, opts...)
	if err != nil {
		return nil, err
	}
	// Each message counts as taken before Pull can see it.
	msgs := make(chan jetstream.Msg)
	go func() {
		defer close(msgs)
		for m := range batch.Messages() {
			c.taken.Add(1)
			msgs <- m
		}
	}()
	return countedBatch{MessageBatch: batch, msgs: msgs}, nil
}

type countedBatch struct {
	jetstream.MessageBatch
	msgs <-chan jetstream.Msg
}

func (b countedBatch) Messages() <-chan jetstream.Msg { return b.msgs }

// TestPullReleasingFetchesForReleasedSlots: a handler that releases its
// slot lets Pull fetch another message while the handler still runs, and
// one that does not keeps its slot; the messages stay unacknowledged until
// their handlers return.
func TestPullReleasingFetchesForReleasedSlots(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Two slots; the first four messages release theirs, so six start:
	// four released and two holding the slots.
	const messages, slots, releasing = 8, 2, 4
	cons := &slotChecked{Consumer: jobs(t, b, messages), slots: slots}
	started := make(chan struct{}, messages)
	finish := make(chan struct{})
	pulled := make(chan func())
	go func() {
		pulled <- bus.PullReleasing(ctx, cons, slots, slog.New(slog.DiscardHandler), func(m jetstream.Msg, release func()) {
			var n int
			_, _ = fmt.Sscan(string(m.Data()), &n)
			if n < releasing {
				cons.freed.Add(1)
				release()
				release() // a second call does nothing
			}
			started <- struct{}{}
			select { // a test that failed early never finishes
			case <-finish:
			case <-ctx.Done():
			}
			_ = m.Ack()
			if n >= releasing {
				cons.freed.Add(1)
			}
		})
	}()
	waitStarts(t, started, releasing+slots, "released slots were not used")
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != releasing+slots {
		t.Errorf("%d messages taken, want %d: %d released slots and %d busy", info.NumAckPending, releasing+slots, releasing, slots)
	}
	close(finish)
	waitStarts(t, started, messages-releasing-slots, "not every message was handled")
	cancel()
	select {
	case wait := <-pulled:
		wait()
	case <-time.After(10 * time.Second):
		t.Fatal("PullReleasing did not return after its context ended")
	}
	if n := cons.over.Load(); n > 0 {
		t.Errorf("%d fetches asked for more messages than PullReleasing had free slots", n)
	}
}

// TestTakeEndsWithItsContext: a fetch bounded by FetchMaxWait outlives
// the context, and Take does not wait for its expiry (a one-shot's
// shutdown waited out a two-second fetch of Dream's this way).
func TestTakeEndsWithItsContext(t *testing.T) {
	b := bustest.StartJetStream(t)
	st := jobsStream(t, b)
	cons, err := st.CreateOrUpdateConsumer(t.Context(), jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		bus.Take(ctx, batch.Messages(), time.Minute, func(m jetstream.Msg) { t.Errorf("started %s of an empty stream", m.Subject()) })
	}()
	cancel()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Take still waits for the fetch's expiry after its context ended")
	}
}

// TestMessageForAStoppedPullIsGivenAgain: a message published just after
// Pull's context ended reaches the fetch Pull left open, which naks it;
// the next process gets it once that fetch has expired, one delivery
// spent. Nak'ed without a delay, it came straight back to the same fetch
// until its deliveries were used up, and nobody got it (a reply
// published just after a gateway stopped, on a connection that stayed
// open, was never sent).
func TestMessageForAStoppedPullIsGivenAgain(t *testing.T) {
	b := bustest.StartJetStream(t)
	st := jobsStream(t, b)
	// Fewer deliveries than Pull's fetch has room for.
	const slots, maxDeliver = 4, 3
	cons, err := st.CreateOrUpdateConsumer(t.Context(), jetstream.ConsumerConfig{
		Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxDeliver: maxDeliver,
	})
	if err != nil {
		t.Fatal(err)
	}
	waiting := func(want bool) func() error {
		return func() error {
			info, err := cons.Info(t.Context())
			if err != nil {
				return err
			}
			if (info.NumWaiting > 0) != want {
				return fmt.Errorf("%d fetches waiting", info.NumWaiting)
			}
			return nil
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	pulled := make(chan func(), 1)
	go func() {
		pulled <- bus.Pull(ctx, cons, slots, slog.New(slog.DiscardHandler), func(m jetstream.Msg) {
			t.Errorf("started %s of an empty stream", m.Subject())
		})
	}()
	bustest.Eventually(t, 10*time.Second, waiting(true))
	cancel()
	bustest.Receive(t, pulled, 10*time.Second)() // Pull returns once its context ended
	if _, err := b.JS.Publish(t.Context(), "jobs.1", []byte("1")); err != nil {
		t.Fatal(err)
	}
	// The fetch Pull left open has expired (or was filled).
	bustest.Eventually(t, 10*time.Second, waiting(false))
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for m := range batch.Messages() {
		got = append(got, m)
	}
	if len(got) != 1 {
		info, _ := cons.Info(t.Context())
		t.Fatalf("the next fetch got %d messages (consumer: %d redelivered, %d pending)", len(got), info.NumRedelivered, info.NumPending)
	}
	meta, err := got[0].Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if meta.NumDelivered > 2 {
		t.Errorf("delivery %d: the stopped Pull's fetch took it %d times", meta.NumDelivered, meta.NumDelivered-1)
	}
}

// waitStarts waits for n handlers to say on started that they started,
// each within 10 s; what is the failure.
func waitStarts(t *testing.T, started <-chan struct{}, n int, what string) {
	t.Helper()
	for range n {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal(what)
		}
	}
}

// jobsStream makes the stream JOBS, of the subjects jobs.>.
func jobsStream(t *testing.T, b *bus.Bus) jetstream.Stream {
	t.Helper()
	st, err := b.JS.CreateStream(t.Context(), jetstream.StreamConfig{Name: "JOBS", Subjects: []string{"jobs.>"}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// jobs publishes messages numbered 0… on a stream of their own and
// returns a consumer of them with explicit acks.
func jobs(t *testing.T, b *bus.Bus, messages int) jetstream.Consumer {
	t.Helper()
	st := jobsStream(t, b)
	for i := range messages {
		if _, err := b.JS.Publish(t.Context(), fmt.Sprint("jobs.", i), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := st.CreateOrUpdateConsumer(t.Context(), jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return cons
}

// TestPullPausesWhileItsConsumerIsGone: a fetch that ends at once with an
// error (no responders: the consumer was deleted, or has no leader while
// it is elected) is logged (each at debug level, a warning at most every
// 10 s) and followed by a pause, not by the next fetch straight away,
// which spun the process against the server.
func TestPullPausesWhileItsConsumerIsGone(t *testing.T) {
	b := bustest.StartJetStream(t)
	cons := jobs(t, b, 0)
	warned := make(chan uint64, 100)
	var warnings atomic.Int32
	log := observetest.LogFunc(func(r slog.Record) {
		if r.Level == slog.LevelWarn {
			warnings.Add(1)
		}
		if r.Level == slog.LevelDebug && r.Message == "fetch failed" {
			select {
			case warned <- b.NC.Stats().OutMsgs:
			default:
			}
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	pulled := make(chan func(), 1)
	go func() {
		pulled <- bus.Pull(ctx, cons, 4, log, func(m jetstream.Msg) { t.Errorf("handled %s of an empty stream", m.Subject()) })
	}()
	if err := b.JS.DeleteConsumer(t.Context(), "JOBS", "w"); err != nil {
		t.Fatal(err)
	}
	first := bustest.Receive(t, warned, 10*time.Second)
	third := first
	for range 2 {
		third = bustest.Receive(t, warned, 10*time.Second)
	}
	if n := warnings.Load(); n != 1 {
		t.Errorf("%d warnings for three failed fetches, want 1", n)
	}
	// Two failed fetches between the first warning and the third: a
	// request each, and nothing else is published on this connection.
	if sent := third - first; sent > 4 {
		t.Errorf("%d messages sent between three failed fetches, want at most 4", sent)
	}
	cancel()
	bustest.Receive(t, pulled, 10*time.Second)()
}
