package bustest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

// LoseQuorum stops nodes 1 and 2 of a 3-node cluster and waits until a
// publish to subj reaches no stream (jetstream.ErrNoStreamResponse): its
// stream has no leader, as while the others elect one after the node
// leading it died.
func (c *Cluster) LoseQuorum(ctx context.Context, b *bus.Bus, subj string) {
	c.t.Helper()
	c.Stop(1)
	c.Stop(2)
	Eventually(c.t, time.Minute, func() error {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := b.JS.Publish(pctx, subj, nil)
		if !errors.Is(err, jetstream.ErrNoStreamResponse) {
			return fmt.Errorf("publish to %s without quorum: %v, want %v", subj, err, jetstream.ErrNoStreamResponse)
		}
		return nil
	})
}

// RegainQuorum starts call, then node 1 again, and returns how long
// after the node's start call ended and its error (failing the test
// after a minute): what a call made while a stream has no leader does
// when it gets one again.
func (c *Cluster) RegainQuorum(call func() error) (took time.Duration, err error) {
	c.t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	start := time.Now()
	c.Start(1)
	err = Receive(c.t, done, time.Minute)
	return time.Since(start), err
}

// LeadAway makes a node other than node i lead stream, asking its leader
// to step down while node i leads it: one request at a time (each starts
// an election, and requests sent while one ran kept a stream leaderless),
// up to five. For a test that stops node i and must not wait on the
// stream: a plain shutdown hands the node's leaderships over only if the
// hand-over gets out before the node is gone, and a stream it did not
// reach had no leader until an election (7.3 s seen).
func (c *Cluster) LeadAway(ctx context.Context, b *bus.Bus, stream string, i int) {
	c.t.Helper()
	for stepDowns := 0; c.streamLeader(ctx, b, stream) == c.Name(i); stepDowns++ {
		if stepDowns == 5 {
			c.t.Fatalf("%s still led by node %d after %d step-downs", stream, i, stepDowns)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := b.NC.RequestWithContext(rctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil)
		cancel()
		if err != nil {
			c.t.Logf("step %s's leader down: %v", stream, err)
		}
	}
}

// ConsumerLeadAway makes a node other than node i lead stream's durable
// consumer, one step-down a try (each starts an election), and returns
// the index of the node that leads it: for a test that stops the
// consumer's leader while its client stays connected through node i.
func (c *Cluster) ConsumerLeadAway(ctx context.Context, b *bus.Bus, stream, consumer string, i int) int {
	c.t.Helper()
	leader := -1
	Eventually(c.t, time.Minute, func() error {
		ictx, cancel := context.WithTimeout(ctx, bus.RequestTry)
		defer cancel()
		cons, err := b.JS.Consumer(ictx, stream, consumer)
		if err != nil {
			return err
		}
		info := cons.CachedInfo()
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return fmt.Errorf("%s/%s has no leader", stream, consumer)
		}
		if info.Cluster.Leader == c.Name(i) {
			_, _ = b.NC.RequestWithContext(ictx, "$JS.API.CONSUMER.LEADER.STEPDOWN."+stream+"."+consumer, nil)
			return fmt.Errorf("%s/%s led by node %d", stream, consumer, i)
		}
		for n := range c.nodes {
			if c.Name(n) == info.Cluster.Leader {
				leader = n
				return nil
			}
		}
		return fmt.Errorf("%s/%s led by %q, not a node of the cluster", stream, consumer, info.Cluster.Leader)
	})
	return leader
}

// streamLeader is the name of the node leading stream, waiting up to 30 s
// for it to have one.
func (c *Cluster) streamLeader(ctx context.Context, b *bus.Bus, stream string) string {
	c.t.Helper()
	var leader string
	Eventually(c.t, 30*time.Second, func() error {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s, err := b.JS.Stream(ictx, stream)
		if err != nil {
			return err
		}
		info := s.CachedInfo()
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return fmt.Errorf("%s has no leader", stream)
		}
		leader = info.Cluster.Leader
		return nil
	})
	return leader
}

// ConsumerApart finds a consumer on a node the client does not talk to,
// so that the node can go down under the consumer alone (a reconnect
// would be another event). It connects to each node in turn and calls
// start, which makes the stream's only consumer on that connection; when
// the consumer lands on the connection's own node it calls stop, deletes
// the stream's consumers and tries the next node, going round the nodes
// up to five times (the server often places a consumer on the node that
// was asked: all three landed there in 1 of 8 runs of one round). It
// returns the node holding the consumer; the connection stays open until
// the test ends.
func (c *Cluster) ConsumerApart(ctx context.Context, b *bus.Bus, stream string, start func(conn *bus.Bus) (stop func())) int {
	c.t.Helper()
	const rounds = 5
	for try := range rounds * len(c.nodes) {
		i := try % len(c.nodes)
		nd := c.nodes[i]
		if nd.srv == nil {
			continue
		}
		conn, err := bus.Connect(ctx, bus.Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", nd.opts.Port), Prefix: b.Space.Prefix(), Name: fmt.Sprint(c.t.Name(), "-n", i+1)})
		if err != nil {
			c.t.Fatalf("connect to node %d: %v", i, err)
		}
		stop := start(conn)
		host := c.consumerNode(ctx, b, stream)
		if host != i {
			c.t.Cleanup(func() { stop(); conn.NC.Close() })
			return host
		}
		stop()
		conn.NC.Close()
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		for name := range c.stream(lctx, b, stream).ConsumerNames(lctx).Name() {
			if err := b.JS.DeleteConsumer(lctx, stream, name); err != nil {
				c.t.Fatalf("delete consumer %s: %v", name, err)
			}
		}
		cancel()
	}
	c.t.Fatalf("every consumer on %s landed on its own connection's node (%d rounds)", stream, rounds)
	return -1
}

// consumerNode is the index of the node leading the only consumer of
// stream.
func (c *Cluster) consumerNode(ctx context.Context, b *bus.Bus, stream string) int {
	c.t.Helper()
	// A consumer just made is listed before its replicas have elected a
	// leader: wait for one.
	var leaders []string
	Eventually(c.t, 30*time.Second, func() error {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		leaders = leaders[:0]
		for info := range c.stream(lctx, b, stream).ListConsumers(lctx).Info() {
			if info.Cluster != nil && info.Cluster.Leader != "" {
				leaders = append(leaders, info.Cluster.Leader)
			}
		}
		if len(leaders) != 1 {
			return fmt.Errorf("%s has consumers led by %v, want one", stream, leaders)
		}
		return nil
	})
	for i, nd := range c.nodes {
		if nd.opts.ServerName == leaders[0] {
			return i
		}
	}
	c.t.Fatalf("consumer of %s led by %q, not a node of the cluster", stream, leaders[0])
	return -1
}

func (c *Cluster) stream(ctx context.Context, b *bus.Bus, name string) jetstream.Stream {
	c.t.Helper()
	s, err := b.JS.Stream(ctx, name)
	if err != nil {
		c.t.Fatalf("stream %s: %v", name, err)
	}
	return s
}
