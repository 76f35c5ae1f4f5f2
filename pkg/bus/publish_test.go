package bus_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
)

// TestPublishMsgOutlivesItsServerStopping: a publish in flight through
// the node a client is connected to (here the JetStream meta leader)
// while that node shuts down is lost with it, and is sent again through
// another node, acked within about an ack wait, and stored once. Each
// try waited CallTimeout for its ack, and the lost ones failed their
// calls after 10 s.
func TestPublishMsgOutlivesItsServerStopping(t *testing.T) {
	c := bustest.StartCluster(t, 3)
	stopUntilLost(t, c, func() (*bus.Bus, int) { return connectOffPUBLeader(t, c) }, 3*bus.AckWait)
}

// TestPublishMsgOutlivesItsStreamLeaderStopping: a publish in flight to
// the stream's leader while that node shuts down (a node the client is
// not connected to) is sent again and stored once, by the next leader.
// The lost ones waited out CallTimeout and failed their calls.
func TestPublishMsgOutlivesItsStreamLeaderStopping(t *testing.T) {
	c := bustest.StartCluster(t, 3)
	stopUntilLost(t, c, func() (*bus.Bus, int) {
		b, _ := connectOffPUBLeader(t, c)
		return b, streamLeader(t, c, b)
	}, bus.CallTimeout) // a try lost, then the stream electing a leader
}

// connectOffPUBLeader connects a client through the JetStream meta leader
// and moves PUB's leadership off that node, so that a publish goes through
// one node to the stream leader on another. It returns the client and the
// node it is connected to.
func connectOffPUBLeader(t *testing.T, c *bustest.Cluster) (*bus.Bus, int) {
	t.Helper()
	node := c.MetaLeader()
	b := c.ConnectThrough(t, node)
	c.LeadAway(t.Context(), b, "PUB", node)
	return b, node
}

// stopUntilLost publishes through a node's stop (see
// [publishThroughStop]) until a publish had a try lost with the node, in
// up to eight rounds: round connects a client and returns it with the
// node to stop, which is started again after the round. Whether a try is
// in flight when the node goes down is a race, won about one round in
// two. Every publish must succeed within bound, and each message
// be stored once.
func stopUntilLost(t *testing.T, c *bustest.Cluster, round func() (b *bus.Bus, stop int), bound time.Duration) {
	t.Helper()
	const rounds = 8
	createStream(t, c.ConnectThrough(t, 0), 3)
	stored := 0
	for r := range rounds {
		b, stop := round()
		js := &lossyJS{JetStream: b.JS}
		meta := stop == c.MetaLeader()
		longest, n := publishThroughStop(t, c, js, fmt.Sprint(r), stop)
		stored += n
		lost := js.unanswered.Load()
		t.Logf("round %d: %d publishes while node %d (meta leader: %v) stopped, %d tries unanswered, %d sent again; the longest took %s",
			r+1, n, stop, meta, lost, int(js.tries.Load())-n, longest.Round(time.Millisecond))
		if longest > bound {
			t.Errorf("a publish took %s, want at most %s", longest.Round(time.Millisecond), bound)
		}
		wantStored(t, b, stored)
		if lost > 0 {
			return
		}
		c.Start(stop)
		c.WaitJetStream(30 * time.Second)
	}
	t.Skipf("no try lost in %d rounds", rounds)
}

// publishThroughStop publishes messages of distinct ids from eight
// goroutines, each one after the other, stops node i once each has had
// a hundred acked, and lets each go on until one it sent after the node
// is down is acked. It returns the longest publish and how many there
// were, and fails the test if a publish fails. When a try is lost, every
// publisher's is.
func publishThroughStop(t *testing.T, c *bustest.Cluster, js jetstream.JetStream, round string, i int) (longest time.Duration, n int) {
	t.Helper()
	const publishers, warm = 8, 100
	stopped := make(chan struct{})
	type result struct {
		longest time.Duration
		n       int
		err     error
	}
	warmed := make(chan struct{}, publishers)
	done := make(chan result, publishers)
	for g := range publishers {
		go func() {
			var r result
			for {
				down := false
				select {
				case <-stopped:
					down = true
				default:
				}
				m := nats.NewMsg(fmt.Sprintf("pub.%s.%d.%d", round, g, r.n))
				m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("%s-%d-%d", round, g, r.n))
				start := time.Now()
				_, err := bus.PublishMsg(t.Context(), js, m)
				r.longest = max(r.longest, time.Since(start))
				if err != nil {
					r.err = fmt.Errorf("publish %s after %s: %w", m.Subject, time.Since(start).Round(time.Millisecond), err)
					break
				}
				if r.n++; r.n == warm {
					warmed <- struct{}{}
				}
				if down {
					break
				}
			}
			done <- r
		}()
	}
	for range publishers {
		select {
		case <-warmed:
		case r := <-done:
			t.Fatalf("before node %d stopped: %v", i, r.err)
		case <-time.After(time.Minute):
			t.Fatalf("not %d publishes each within a minute", warm)
		}
	}
	c.Stop(i)
	close(stopped)
	var err error
	for range publishers {
		r := bustest.Receive(t, done, time.Minute)
		longest, n = max(longest, r.longest), n+r.n
		err = cmp.Or(err, r.err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return longest, n
}

// createStream creates stream PUB on pub.> with a one-minute duplicate
// window.
func createStream(t *testing.T, b *bus.Bus, replicas int) jetstream.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var st jetstream.Stream
	err := bus.Retry(ctx, backoff.Backoff{}, func(ctx context.Context) (err error) {
		st, err = b.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "PUB", Subjects: []string{"pub.>"}, Replicas: replicas, Duplicates: time.Minute})
		return err
	}, nil)
	if err != nil {
		t.Fatalf("create stream PUB: %v", err)
	}
	return st
}

// streamLeader is the index of the node leading PUB.
func streamLeader(t *testing.T, c *bustest.Cluster, b *bus.Bus) int {
	t.Helper()
	leader := -1
	untilPUB(t, b, func(info *jetstream.StreamInfo) error {
		if cl := info.Cluster; cl != nil {
			for i := range 3 {
				if c.Name(i) == cl.Leader {
					leader = i
					return nil
				}
			}
		}
		return errors.New("PUB has no leader")
	})
	return leader
}

// wantStored checks that PUB holds exactly n messages: one of each id
// published, none twice.
func wantStored(t *testing.T, b *bus.Bus, n int) {
	t.Helper()
	untilPUB(t, b, func(info *jetstream.StreamInfo) error {
		if got := info.State.Msgs; got != uint64(n) {
			return fmt.Errorf("PUB holds %d messages, want %d", got, n)
		}
		return nil
	})
}

// untilPUB reads PUB's info, each read bounded, until check accepts it,
// failing the test after 30 s.
func untilPUB(t *testing.T, b *bus.Bus, check func(*jetstream.StreamInfo) error) {
	t.Helper()
	bustest.Eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		st, err := b.JS.Stream(ctx, "PUB")
		if err != nil {
			return err
		}
		return check(st.CachedInfo())
	})
}

// lossyJS is a JetStream whose PublishMsg tries follow a script, then
// reach the server. It counts the tries, and those of them that reached
// the server and had no answer, and keeps each try's deadline.
type lossyJS struct {
	jetstream.JetStream
	script     []try
	tries      atomic.Int32
	unanswered atomic.Int32

	mu        sync.Mutex
	deadlines []time.Time
}

// A try is what one PublishMsg does instead of publishing.
type try func(ctx context.Context, js jetstream.JetStream, m *nats.Msg) (*jetstream.PubAck, error)

// lost is a try that never reaches a stream and is never answered.
func lost(ctx context.Context, _ jetstream.JetStream, _ *nats.Msg) (*jetstream.PubAck, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// ackLost is a try that the stream stores and whose ack never comes.
func ackLost(ctx context.Context, js jetstream.JetStream, m *nats.Msg) (*jetstream.PubAck, error) {
	if _, err := js.PublishMsg(ctx, m); err != nil {
		return nil, fmt.Errorf("the try to lose the ack of: %w", err)
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// inWriting is a try the stream answers with "still writing a message of
// this id".
func inWriting(context.Context, jetstream.JetStream, *nats.Msg) (*jetstream.PubAck, error) {
	return nil, fmt.Errorf("nats: %w", &jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"})
}

func (l *lossyJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if d, ok := ctx.Deadline(); ok {
		l.mu.Lock()
		l.deadlines = append(l.deadlines, d)
		l.mu.Unlock()
	}
	n := int(l.tries.Add(1))
	if n <= len(l.script) {
		return l.script[n-1](ctx, l.JetStream, m)
	}
	ack, err := l.JetStream.PublishMsg(ctx, m, opts...)
	if errors.Is(err, context.DeadlineExceeded) {
		l.unanswered.Add(1)
	}
	return ack, err
}

// TestPublishMsgDuplicate: the ack's Duplicate says the message was
// stored before the call; a duplicate answering a try of the call itself
// whose ack never came is reported as stored. A message is stored once
// whatever its tries did.
func TestPublishMsgDuplicate(t *testing.T) {
	b := bustest.StartJetStream(t)
	createStream(t, b, 1)
	tests := []struct {
		name          string
		storedBefore  bool // by an earlier call
		script        []try
		wantDuplicate bool
		wantTries     int
	}{
		{"new", false, nil, false, 1},
		{"stored by an earlier call", true, nil, true, 1},
		{"first try lost", false, []try{lost}, false, 2},
		{"first try stored, its ack lost", false, []try{ackLost}, false, 2},
		{"first try stored, the stream still writing it", false, []try{ackLost, inWriting}, false, 3},
		{"another call's publish still being written", true, []try{inWriting}, true, 2},
		// The stream's answer cannot tell the earlier call from the lost
		// try: reported as stored by this call.
		{"stored by an earlier call, first try lost", true, []try{lost}, false, 2},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msg := func() *nats.Msg {
				m := nats.NewMsg(fmt.Sprintf("pub.dup.%d", i))
				m.Data = []byte("hello")
				m.Header.Set(nats.MsgIdHdr, fmt.Sprint("dup-", i))
				return m
			}
			if tt.storedBefore {
				if _, err := bus.PublishMsg(t.Context(), b.JS, msg()); err != nil {
					t.Fatalf("earlier publish: %v", err)
				}
			}
			js := &lossyJS{JetStream: b.JS, script: tt.script}
			ack, err := bus.PublishMsg(t.Context(), js, msg())
			if err != nil {
				t.Fatalf("PublishMsg: %v", err)
			}
			if ack.Duplicate != tt.wantDuplicate {
				t.Errorf("Duplicate = %v, want %v", ack.Duplicate, tt.wantDuplicate)
			}
			if got := int(js.tries.Load()); got != tt.wantTries {
				t.Errorf("%d tries, want %d", got, tt.wantTries)
			}
			wantOnSubject(t, b, fmt.Sprintf("pub.dup.%d", i), ack.Sequence)
		})
	}
}

// wantOnSubject checks that subj holds exactly one message, at seq.
func wantOnSubject(t *testing.T, b *bus.Bus, subj string, seq uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	st, err := b.JS.Stream(ctx, "PUB")
	if err != nil {
		t.Fatalf("stream PUB: %v", err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatalf("stream PUB info: %v", err)
	}
	if got := info.State.Subjects[subj]; got != 1 {
		t.Errorf("%s holds %d messages, want 1", subj, got)
	}
	last, err := st.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		t.Fatalf("last message on %s: %v", subj, err)
	}
	if last.Sequence != seq {
		t.Errorf("acked sequence %d, stored at %d", seq, last.Sequence)
	}
}

// TestPublishMsgGivesUpWithoutAnAck: a publish no server answers fails
// after CallTimeout, whether it was sent again (with a Nats-Msg-Id) or
// not (without one, where a second try could store a second copy).
func TestPublishMsgGivesUpWithoutAnAck(t *testing.T) {
	b := bustest.StartJetStream(t)
	createStream(t, b, 1)
	tests := []struct {
		name  string
		msgID string
		// offline: no try reaches a server, so the call runs in a
		// synctest bubble, its waits passing in fake time.
		offline   bool
		script    []try
		wantTries int
		wantMsgs  uint64
	}{
		{"no server answers", "silent-1", true, []try{lost, lost, lost, lost, lost, lost, lost}, int(bus.CallTimeout / bus.AckWait), 0},
		{"without an id, stored and its ack lost", "", false, []try{ackLost}, 1, 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			subj := fmt.Sprintf("pub.silent.%d", i)
			js := &lossyJS{JetStream: b.JS, script: tt.script}
			m := nats.NewMsg(subj)
			if tt.msgID != "" {
				m.Header.Set(nats.MsgIdHdr, tt.msgID)
			}
			var err error
			if tt.offline {
				// Every try is lost before a server: in fake time the call
				// fails exactly when its tries have waited out CallTimeout.
				synctest.Test(t, func(t *testing.T) {
					start := time.Now()
					_, err = bus.PublishMsg(t.Context(), js, m)
					if took := time.Since(start); took != bus.CallTimeout {
						t.Errorf("failed after %s, want %s", took, bus.CallTimeout)
					}
				})
			} else {
				// The try reaches the server (real network, no bubble): the
				// call ends at its last try's deadline, which the call set
				// CallTimeout after it began (not an AckWait: a message
				// without an id is not sent again).
				start := time.Now()
				_, err = bus.PublishMsg(t.Context(), js, m)
				js.mu.Lock()
				last := js.deadlines[len(js.deadlines)-1]
				js.mu.Unlock()
				if d := last.Sub(start); d < bus.CallTimeout || d > 2*bus.CallTimeout {
					t.Errorf("the last try's deadline was %s after the call began, want about %s", d.Round(time.Millisecond), bus.CallTimeout)
				}
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("PublishMsg = %v, want a deadline", err)
			}
			if got := int(js.tries.Load()); got != tt.wantTries {
				t.Errorf("%d tries, want %d", got, tt.wantTries)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			st, err := b.JS.Stream(ctx, "PUB")
			if err != nil {
				t.Fatal(err)
			}
			info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
			if err != nil {
				t.Fatal(err)
			}
			if got := info.State.Subjects[subj]; got != tt.wantMsgs {
				t.Errorf("%s holds %d messages, want %d", subj, got, tt.wantMsgs)
			}
		})
	}
}

// TestPublishMsgKeepsItsExpectations: the publish options reach every
// try; an expectation the stream refuses is answered at once, not tried
// again.
func TestPublishMsgKeepsItsExpectations(t *testing.T) {
	b := bustest.StartJetStream(t)
	createStream(t, b, 1)
	tests := []struct {
		name      string
		before    int    // messages already on the subject
		expect    uint64 // last sequence on the subject
		script    []try
		wantCode  jetstream.ErrorCode // 0: stored
		wantTries int
	}{
		{"met", 0, 0, nil, 0, 1},
		{"met, first try lost", 0, 0, []try{lost}, 0, 2},
		{"refused", 1, 0, nil, jetstream.JSErrCodeStreamWrongLastSequence, 1},
		{"refused, first try lost", 1, 0, []try{lost}, jetstream.JSErrCodeStreamWrongLastSequence, 2},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subj := fmt.Sprintf("pub.expect.%d", i)
			for n := range tt.before {
				bustest.Publish(t, b, subj, []byte(fmt.Sprint("before ", n)))
			}
			m := nats.NewMsg(subj)
			m.Header.Set(nats.MsgIdHdr, fmt.Sprint("expect-", i))
			js := &lossyJS{JetStream: b.JS, script: tt.script}
			ack, err := bus.PublishMsg(t.Context(), js, m, jetstream.WithExpectLastSequencePerSubject(tt.expect))
			var apiErr *jetstream.APIError
			switch {
			case tt.wantCode == 0 && err != nil:
				t.Fatalf("PublishMsg: %v", err)
			case tt.wantCode == 0:
				wantOnSubject(t, b, subj, ack.Sequence)
			case !errors.As(err, &apiErr) || apiErr.ErrorCode != tt.wantCode:
				t.Fatalf("PublishMsg: %v, want JetStream error %d", err, tt.wantCode)
			}
			if got := int(js.tries.Load()); got != tt.wantTries {
				t.Errorf("%d tries, want %d", got, tt.wantTries)
			}
		})
	}
}
