package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

// Status is a snapshot of the fleet for operators.
type Status struct {
	Streams   []StreamStatus
	Consumers []ConsumerStatus
	Services  []ServiceInstance
}

// StreamStatus is one stream's size.
type StreamStatus struct {
	Name  string
	Msgs  uint64
	Bytes uint64
}

// ConsumerStatus is one consumer's backlog.
type ConsumerStatus struct {
	Stream, Name string
	// Pending messages not yet delivered.
	Pending uint64
	// InFlight messages delivered and not yet acked.
	InFlight    int
	Redelivered int
	Waiting     int
}

// ServiceInstance is one running service found by micro discovery.
type ServiceInstance struct {
	Name, ID, Version string
	Metadata          map[string]string
}

// GetStatus reads streams and consumers of the fleet and discovers its
// running services (workers, tool runners, consolidators, gateways),
// waiting up to wait for their answers.
func GetStatus(ctx context.Context, b *bus.Bus, wait time.Duration) (*Status, error) {
	st := &Status{}
	names := []string{b.Space.InboundStream(), b.Space.OutboundStream(), b.Space.HistoryStream(), b.Space.MemoryStream(), b.Space.DeadLetterStream()}
	for _, name := range names {
		s, err := b.JS.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		info := s.CachedInfo()
		st.Streams = append(st.Streams, StreamStatus{Name: name, Msgs: info.State.Msgs, Bytes: info.State.Bytes})
		lister := s.ListConsumers(ctx)
		for ci := range lister.Info() {
			st.Consumers = append(st.Consumers, ConsumerStatus{
				Stream: name, Name: ci.Name, Pending: ci.NumPending, InFlight: ci.NumAckPending,
				Redelivered: ci.NumRedelivered, Waiting: ci.NumWaiting,
			})
		}
		if err := lister.Err(); err != nil {
			return nil, fmt.Errorf("consumers of %s: %w", name, err)
		}
	}
	svcs, err := Discover(ctx, b.NC, wait)
	if err != nil {
		return nil, err
	}
	st.Services = svcs
	return st, nil
}

// Discover pings every NATS micro service and collects the answers that
// arrive within wait.
func Discover(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]ServiceInstance, error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("discover: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$SRV.PING", inbox, nil); err != nil {
		return nil, fmt.Errorf("discover: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var out []ServiceInstance
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break
		}
		var ping micro.Ping
		if json.Unmarshal(m.Data, &ping) != nil {
			continue
		}
		out = append(out, ServiceInstance{Name: ping.Name, ID: ping.ID, Version: ping.Version, Metadata: ping.Metadata})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}
