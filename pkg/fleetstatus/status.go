package fleetstatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
)

// Names under which the fleet's services answer micro discovery.
const (
	WorkerService       = "agent-worker"
	ToolRunnerService   = "tool-runner"
	ConsolidatorService = "memory-consolidator"
	GatewayService      = "channel-gateway"
)

// Status is a snapshot of the fleet.
type Status struct {
	Streams   []Stream   `json:"streams"`
	Consumers []Consumer `json:"consumers"`
	Services  []Service  `json:"services"`
	// Unreadable are the streams that did not answer in time.
	Unreadable []Unreadable `json:"unreadable,omitempty"`
}

// Unreadable is a stream that did not answer, and what its reader got.
type Unreadable struct {
	Stream string `json:"stream"`
	Err    string `json:"error"`
}

// Stream is one stream's size and sequence range.
type Stream struct {
	Name     string `json:"name"`
	Msgs     uint64 `json:"msgs"`
	Bytes    uint64 `json:"bytes"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
}

// Consumer is one consumer's backlog.
type Consumer struct {
	Stream string `json:"stream"`
	Name   string `json:"name"`
	// Pending messages not yet delivered: the consumer's lag.
	Pending uint64 `json:"pending"`
	// InFlight messages delivered and not yet acked.
	InFlight    int `json:"in_flight"`
	Redelivered int `json:"redelivered"`
	// Waiting pull requests, one per idle fetch of a worker.
	Waiting int `json:"waiting"`
	// Ephemeral consumers have no durable name: a client's (a CLI
	// command's replies, a gateway's watch). The server deletes one
	// InactiveThreshold after its client's last pull, so one that lags
	// may belong to a client that has just exited.
	Ephemeral         bool          `json:"ephemeral,omitempty"`
	InactiveThreshold time.Duration `json:"inactive_threshold_ns,omitempty"`
}

// Service is one running service instance found by micro discovery.
type Service struct {
	Name     string            `json:"name"`
	ID       string            `json:"id"`
	Version  string            `json:"version"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Stream returns the stream called name, and whether the fleet has it.
func (s *Status) Stream(name string) (Stream, bool) {
	for _, st := range s.Streams {
		if st.Name == name {
			return st, true
		}
	}
	return Stream{}, false
}

// Consumer returns the consumer called name on stream, and whether the
// fleet has it.
func (s *Status) Consumer(stream, name string) (Consumer, bool) {
	for _, c := range s.Consumers {
		if c.Stream == stream && c.Name == name {
			return c, true
		}
	}
	return Consumer{}, false
}

// MCPServerKey is the metadata key of the micro services a tool runner
// registers for its MCP servers' tools (under the runner's own name):
// they are part of that runner, not runners of their own.
const MCPServerKey = "mcp_server"

// Online counts the instances of the service called name. A tool
// runner's MCP tool services are not counted.
func (s *Status) Online(name string) int {
	n := 0
	for _, svc := range s.Services {
		if _, mcp := svc.Metadata[MCPServerKey]; svc.Name == name && !mcp {
			n++
		}
	}
	return n
}

// Get reads the fleet's streams (inbound, outbound, history, memory, dead
// letters; missing ones are left out) and their consumers, and discovers
// its running services, waiting up to wait for their answers. The streams
// are read at once and beside the discovery, each again until it answers;
// one that does not answer before ctx ends, or within [readTimeout], is
// listed in Unreadable and the rest is still returned. That is what a
// cluster looks like for a few seconds after a node is killed (measured:
// 6 s until the streams it led answer again), when an operator wants the
// status most.
func Get(ctx context.Context, b *bus.Bus, wait time.Duration) (*Status, error) {
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	names := []string{b.Space.InboundStream(), b.Space.OutboundStream(), b.Space.HistoryStream(), b.Space.MemoryStream(), b.Space.DeadLetterStream()}
	type read struct {
		stream    *Stream
		consumers []Consumer
		err       error
	}
	reads := make([]read, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			reads[i].stream, reads[i].consumers, reads[i].err = readStream(rctx, b, name)
		})
	}
	svcs, err := Discover(ctx, b.NC, wait)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	st := &Status{Services: svcs}
	for i, r := range reads {
		switch {
		case r.err != nil:
			st.Unreadable = append(st.Unreadable, Unreadable{Stream: names[i], Err: r.err.Error()})
		case r.stream != nil:
			st.Streams = append(st.Streams, *r.stream)
			st.Consumers = append(st.Consumers, r.consumers...)
		}
	}
	return st, nil
}

// readTimeout bounds all the reads of one stream: one held by a node
// that is down for good (a stream with one replica) is given up on.
const readTimeout = 15 * time.Second

// readStream reads one stream and its consumers, in tries of [bus.RequestTry]
// until one answers or ctx ends; a stream that does not exist is nil
// without an error.
func readStream(ctx context.Context, b *bus.Bus, name string) (*Stream, []Consumer, error) {
	var (
		st        *Stream
		consumers []Consumer
	)
	var last error
	err := bus.RetryEach(ctx, backoff.Backoff{Max: time.Second}, bus.RequestTry, func(ctx context.Context) error {
		st, consumers, last = readStreamOnce(ctx, b, name)
		return last
	}, nil)
	if err != nil && last != nil {
		return nil, nil, last // what the stream answered, not ctx's end joined to it
	}
	return st, consumers, err
}

func readStreamOnce(ctx context.Context, b *bus.Bus, name string) (*Stream, []Consumer, error) {
	s, err := b.JS.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("stream %s: %w", name, err)
	}
	state := s.CachedInfo().State
	var consumers []Consumer
	seen := map[string]bool{}
	lister := s.ListConsumers(ctx)
	for ci := range lister.Info() {
		// With a node down, the server lists each consumer only it held
		// as an entry without a name, and nats.go then asks for the next
		// page from how many entries it got: a consumer came twice.
		if ci.Name == "" || seen[ci.Name] {
			continue
		}
		seen[ci.Name] = true
		consumers = append(consumers, Consumer{
			Stream: name, Name: ci.Name, Pending: ci.NumPending, InFlight: ci.NumAckPending,
			Redelivered: ci.NumRedelivered, Waiting: ci.NumWaiting,
			Ephemeral: ci.Config.Durable == "", InactiveThreshold: ci.Config.InactiveThreshold,
		})
	}
	if err := lister.Err(); err != nil {
		return nil, nil, fmt.Errorf("consumers of %s: %w", name, err)
	}
	sort.Slice(consumers, func(i, j int) bool { return consumers[i].Name < consumers[j].Name })
	return &Stream{Name: name, Msgs: state.Msgs, Bytes: state.Bytes, FirstSeq: state.FirstSeq, LastSeq: state.LastSeq}, consumers, nil
}

// Discover pings every NATS micro service and collects the answers that
// arrive within wait (or until ctx ends), sorted by name and id.
func Discover(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]Service, error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("fleetstatus: discover: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$SRV.PING", inbox, nil); err != nil {
		return nil, fmt.Errorf("fleetstatus: discover: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	out := []Service{}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break
		}
		var ping micro.Ping
		if json.Unmarshal(m.Data, &ping) != nil || ping.Name == "" {
			continue
		}
		out = append(out, Service{Name: ping.Name, ID: ping.ID, Version: ping.Version, Metadata: ping.Metadata})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}
