package fleetstatus

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

// Version is the version services announce.
const Version = "0.1.0"

// IDKey is the metadata key under which a service announces the id it
// was registered with (see [Register]).
const IDKey = "id"

// ChannelsKey is the metadata key under which a channel-gateway
// announces the channels it runs, comma separated (see [WithChannels]).
const ChannelsKey = "channels"

// RegisterOption adds to what [Register] announces.
type RegisterOption func(meta map[string]string)

// WithChannels announces the channels a gateway runs (its enabled
// ones), so that a client can tell a channel the fleet does not run from
// one that is starting.
func WithChannels(names []string) RegisterOption {
	return func(meta map[string]string) { meta[ChannelsKey] = strings.Join(names, ",") }
}

// Register announces a running service instance (e.g. [WorkerService])
// to micro discovery, so that `nanofleet status` and the dashboard count
// it; it answers discovery when Register returns, or, while the server
// cannot be reached, once it is back (Register waits for that at most
// bus.CallTimeout, and not past ctx). It serves no endpoints; stop
// removes the announcement.
func Register(ctx context.Context, nc *nats.Conn, name, id string, opts ...RegisterOption) (stop func(), err error) {
	meta := map[string]string{IDKey: id}
	for _, o := range opts {
		o(meta)
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:     name,
		Version:  Version,
		Metadata: meta,
	})
	if err != nil {
		return nil, fmt.Errorf("register %s with discovery: %w", name, err)
	}
	// Announced once the server has the subscriptions: a client asking
	// right after (a test, a CLI command) finds it. A connection that is
	// down sends them when it is back.
	fctx, cancel := context.WithTimeout(ctx, bus.CallTimeout)
	_ = nc.FlushWithContext(fctx)
	cancel()
	return func() { _ = svc.Stop() }, nil
}

// Channels returns the channels a gateway announced with [WithChannels];
// ok is false when it announced none (a gateway from before they were
// announced).
func (s Service) Channels() (names []string, ok bool) {
	v, ok := s.Metadata[ChannelsKey]
	if !ok {
		return nil, false
	}
	if v == "" {
		return []string{}, true
	}
	return strings.Split(v, ","), true
}

// DefaultID is the id of an instance not given one: hostname-pid, unique
// among the running instances and telling the operator where each runs.
func DefaultID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
