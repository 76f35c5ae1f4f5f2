package fleet

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
)

// Status is a snapshot of the fleet for operators; see [fleetstatus].
type Status = fleetstatus.Status

// StreamStatus is one stream's size.
type StreamStatus = fleetstatus.Stream

// ConsumerStatus is one consumer's backlog.
type ConsumerStatus = fleetstatus.Consumer

// ServiceInstance is one running service found by micro discovery.
type ServiceInstance = fleetstatus.Service

// GetStatus reads streams and consumers of the fleet and discovers its
// running services (workers, tool runners, consolidators, gateways),
// waiting up to wait for their answers.
func GetStatus(ctx context.Context, b *bus.Bus, wait time.Duration) (*Status, error) {
	return fleetstatus.Get(ctx, b, wait)
}

// Discover pings every NATS micro service and collects the answers that
// arrive within wait.
func Discover(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]ServiceInstance, error) {
	return fleetstatus.Discover(ctx, nc, wait)
}
